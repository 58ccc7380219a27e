"""OpenTelemetry GenAI spans in OTLP JSON: ``execute_tool`` spans are the tool calls.

A file is one OTLP/JSON export (``{"resourceSpans": [...]}``) or JSON Lines of them (the collector's
file exporter). Spans are read from ``resourceSpans[].scopeSpans[].spans[]``.

Mapping:

- **trajectories** — one per trace (``traceId``), in the order traces first appear; run id =
  ``gen_ai.conversation.id`` when a span carries it; ``service.name`` is kept in ``Source.extra``.
- **calls** — spans with ``gen_ai.operation.name = execute_tool``, by start time: tool =
  ``gen_ai.tool.name`` (else the span name after ``execute_tool``), id = ``gen_ai.tool.call.id``,
  arguments = ``gen_ai.tool.call.arguments`` (a JSON string or a structured ``kvlistValue``),
  ``at`` = the span's start. The arguments attribute is opt-in: calls recorded without it get empty
  arguments and are listed in ``Source.extra["arguments_missing"]``.
- **turns** — tool spans between two inference spans (``chat``, ``text_completion``,
  ``generate_content``) are one turn; a trace without inference spans has one call per turn.
- **results** — span status ``ERROR`` (code 2) makes the result an error: ``"<error.type>: <message>"``
  from ``error.type`` and the status message (or the ``exception`` event's message). Otherwise the
  output is ``gen_ai.tool.call.result`` (JSON text decoded when it holds an object or a list).
- **principal** — not in the conventions: the default principal. **verdict** — none.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from pathlib import Path
from typing import Any

from litmus_replay.replay.model import Trajectory

from ._build import Builder, error, ok, require_calls
from ._doc import Doc, read_json_or_lines
from .base import Adapter, Probe, register_adapter

OPERATION = "gen_ai.operation.name"
EXECUTE_TOOL = "execute_tool"
INFERENCE = {"chat", "text_completion", "generate_content"}
STATUS_ERROR = (2, "STATUS_CODE_ERROR", "ERROR")


def any_value(doc: Doc) -> Any:
    """An OTLP ``AnyValue`` as a plain value (``{}`` is null)."""
    for key, value in doc.entries():
        if key == "stringValue":
            return value.as_str()
        if key == "boolValue":
            return value.as_bool()
        if key == "intValue":
            return int(value.as_id()) if _is_int(value.value) else value.fail("expected an integer")
        if key == "doubleValue":
            return value.as_number() if not isinstance(value.value, str) else _double(value)
        if key == "arrayValue":
            items = value.opt("values")
            return [any_value(item) for item in items.elements()] if items is not None else []
        if key == "kvlistValue":
            return attributes(value.opt("values"))
        if key == "bytesValue":
            return _bytes(value)
    return None


def _is_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    return isinstance(value, str) and value.lstrip("-").isdigit() and len(value) < 40


def _double(value: Doc) -> float:
    try:
        return float(value.as_str())  # "NaN", "Infinity" in the protobuf JSON mapping
    except ValueError:
        value.fail("expected a number")


def _bytes(value: Doc) -> str:
    try:
        return base64.b64decode(value.as_str(), validate=True).hex()
    except (binascii.Error, ValueError):
        value.fail("expected base64 bytes")


def attributes(doc: Doc | None) -> dict[str, Any]:
    """A ``[{key, value}]`` attribute list as a dict (later keys win, as in the SDKs)."""
    out: dict[str, Any] = {}
    for item in doc.elements() if doc is not None else ():
        value = item.opt("value")
        out[item.need("key").as_str()] = any_value(value) if value is not None else None
    return out


def _nanos(span: Doc, key: str) -> int | None:
    value = span.opt(key)
    if value is None:
        return None
    if not _is_int(value.value):
        value.fail("expected Unix time in nanoseconds")
    return int(value.value)


class _Span:
    """What the mapping needs of one span."""

    def __init__(self, doc: Doc, order: int, resource: dict[str, Any]):
        doc.as_dict()
        self.doc = doc
        self.order = order
        self.resource = resource
        self.trace = doc.need("traceId").as_id()
        self.name = doc.str_at("name") or ""
        self.attrs = attributes(doc.opt("attributes"))
        self.start = _nanos(doc, "startTimeUnixNano")
        operation = self.attrs.get(OPERATION)
        if operation is None and self.name.startswith(f"{EXECUTE_TOOL} "):
            operation = EXECUTE_TOOL
        self.operation = operation

    def sort_key(self) -> tuple[bool, int, int]:
        return (self.start is None, self.start or 0, self.order)


def _spans(roots: list[Doc]) -> list[_Span]:
    spans: list[_Span] = []
    for root in roots:
        for resource_spans in root.need("resourceSpans").elements():
            resource = resource_spans.opt("resource")
            resource_attrs = attributes(resource.opt("attributes")) if resource is not None else {}
            scopes = resource_spans.opt("scopeSpans") or resource_spans.opt("instrumentationLibrarySpans")
            for scope in scopes.elements() if scopes is not None else ():
                found = scope.opt("spans")
                for doc in found.elements() if found is not None else ():
                    spans.append(_Span(doc, len(spans), resource_attrs))
    return spans


def _tool_name(span: _Span) -> str:
    name = span.attrs.get("gen_ai.tool.name")
    if isinstance(name, str) and name.strip():
        return name
    fallback = span.name[len(EXECUTE_TOOL) :].strip()
    if not fallback:
        span.doc.fail("an execute_tool span needs gen_ai.tool.name", f"{span.doc.path}.attributes")
    return fallback


def _outcome(span: _Span) -> dict[str, Any]:
    status = span.doc.opt("status")
    code = status.value.get("code") if status is not None and status.is_dict() else None
    if code in STATUS_ERROR:
        message = status.str_at("message") or _exception_message(span)
        kind = span.attrs.get("error.type")
        if isinstance(kind, str) and kind and message and kind not in message:
            message = f"{kind}: {message}"
        return error(message or (kind if isinstance(kind, str) else None))
    return ok(_decoded(span.attrs.get("gen_ai.tool.call.result")))


def _exception_message(span: _Span) -> str | None:
    events = span.doc.opt("events")
    for event in events.elements() if events is not None else ():
        if event.str_at("name") == "exception":
            message = attributes(event.opt("attributes")).get("exception.message")
            if isinstance(message, str):
                return message
    return None


def _decoded(value: Any) -> Any:
    """A result recorded as JSON text, decoded when it holds an object or a list (best effort, per spec)."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            decoded = json.loads(value)
        except (ValueError, RecursionError):
            return value
        return decoded if _finite(decoded) else value
    return value


def _finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    return True


def _arguments(span: _Span) -> Doc | None:
    if "gen_ai.tool.call.arguments" not in span.attrs:
        return None
    value = span.attrs["gen_ai.tool.call.arguments"]
    if value is not None and not isinstance(value, (str, dict)):
        span.doc.fail("gen_ai.tool.call.arguments must be a JSON string or an object", f"{span.doc.path}.attributes")
    return Doc(value, span.doc.file, f"{span.doc.path}.attributes[gen_ai.tool.call.arguments]")


def _trajectory(trace: str, spans: list[_Span], file: str) -> Trajectory:
    builder = Builder()
    missing: list[str] = []
    has_inference = any(s.operation in INFERENCE for s in spans)
    new_turn = True
    for span in sorted(spans, key=_Span.sort_key):
        if span.operation in INFERENCE:
            new_turn = True
        elif span.operation == EXECUTE_TOOL:
            if new_turn:
                builder.turn()
                new_turn = not has_inference  # without inference spans, one call per turn
            arguments = _arguments(span)
            at = span.start / 1e9 if span.start is not None else None
            call_id = span.attrs.get("gen_ai.tool.call.id")
            key = builder.call(_tool_name(span), arguments, call_id if isinstance(call_id, str) else None, at=at, result=_outcome(span))
            if arguments is None:
                missing.append(key)
    conversation = next((s.attrs["gen_ai.conversation.id"] for s in spans if isinstance(s.attrs.get("gen_ai.conversation.id"), str)), None)
    service = next((s.resource["service.name"] for s in spans if isinstance(s.resource.get("service.name"), str)), None)
    extra: dict[str, Any] = {"service.name": service} if service else {}
    if missing:
        extra["arguments_missing"] = missing
    return builder.build(file, spans[0].doc.path, trajectory_id=trace, source_format="otel", run_id=conversation, extra=extra)


@register_adapter
class OTelAdapter(Adapter):
    name = "otel"

    @classmethod
    def sniff(cls, probe: Probe) -> bool:
        data = probe.json()
        if data is None:
            data = probe.first_line()
        return isinstance(data, dict) and "resourceSpans" in data

    def load(self, path: Path) -> list[Trajectory]:
        roots = read_json_or_lines(path)
        spans = _spans(roots)
        traces: dict[str, list[_Span]] = {}
        for span in spans:
            traces.setdefault(span.trace, []).append(span)
        trajectories = [
            _trajectory(trace, members, str(path))
            for trace, members in traces.items()
            if any(s.operation == EXECUTE_TOOL for s in members)
        ]
        return require_calls(trajectories, str(path), "resourceSpans", f"no {EXECUTE_TOOL} span among {len(spans)} spans")
