"""OpenAI Chat Completions conversations: recorded cassettes, request bodies, or message lists.

Mapping:

- **turns** — each assistant message is a turn (its text, its ``tool_calls``); the deprecated
  ``function_call`` counts as one call without an id.
- **arguments** — ``function.arguments`` is a JSON *string*; it is parsed (see ``arguments_of``).
- **ids** — ``tool_calls[].id`` is kept; a ``role: tool`` message answers the pending call with its
  ``tool_call_id`` (ids may repeat: first pending first).
- **errors** — Chat Completions has no error flag on tool messages: a result is an error when its text
  carries the benchmark's error convention, a text prefix — ``Error:`` by default (tau-bench's, and
  most harnesses'); set ``OpenAIChatAdapter(error_prefixes=(...))``, or ``()`` to read every result as ok.
- **principal** — none in the format: the default principal, unless the request body's ``metadata``
  (the API's own string-to-string map) names one (see below).
- **verdict** — none in the format, unless ``metadata`` names one.
- **metadata** — a plain request body's ``metadata`` may carry what the format lacks: ``task``,
  ``principal``, ``ambient_session`` and ``verdict`` (the original verdict's label); other keys, and
  values that are not non-empty strings, are ignored. In a cassette, each run's last request says it.
- **cassettes** — see :mod:`._cassette`: one trajectory per run, the request history plus the response.
- **JSON Lines** — one request body a line (as harnesses log them), or OpenAI Batch API input lines
  (``{custom_id, method, url, body}``): a trajectory per line, id the ``custom_id`` where there is one,
  else ``<file name>#<line number>``; each body's ``metadata`` is read as above.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from litmus_replay.replay.model import Trajectory

from ._build import DEFAULT_ERROR_PREFIXES, Builder, plural, require_calls, text_of, text_result
from ._cassette import (
    CHAT,
    Exchange,
    cassette_apis,
    cassette_trajectories,
    is_cassette,
    plain_text,
    read_document,
    single_trajectory,
    with_metadata,
)
from ._doc import ROOT, Doc, read_json_or_lines
from .base import Adapter, Probe, register_adapter

def walk_messages(
    messages: Iterable[Doc], builder: Builder, error_prefixes: tuple[str, ...] = DEFAULT_ERROR_PREFIXES
) -> None:
    """Feed Chat Completions messages to ``builder``; results whose text starts with one of
    ``error_prefixes`` are errors."""
    for message in messages:
        role = message.need("role").as_str()
        if role == "assistant":
            _assistant(message, builder)
        elif role in ("tool", "function"):
            result = text_result(text_of(message.opt("content")), error_prefixes)
            builder.result(message.id_at("tool_call_id") if role == "tool" else None, result)


def _assistant(message: Doc, builder: Builder) -> None:
    builder.turn(text_of(message.opt("content")))
    calls = message.opt("tool_calls")
    for call in calls.elements() if calls is not None else ():
        function = call.need("function")
        builder.call(function.need("name").as_name(), function.opt("arguments"), call.id_at("id"))
    legacy = message.opt("function_call")
    if legacy is not None:
        builder.call(legacy.need("name").as_name(), legacy.opt("arguments"))


def signature(message: Any) -> Any:
    """What identifies a message when comparing conversations (response and echo differ in extras)."""
    if not isinstance(message, dict):
        return message
    calls = message.get("tool_calls") if isinstance(message.get("tool_calls"), list) else []
    legacy = message.get("function_call")
    return {
        "role": message.get("role"),
        "text": plain_text(message.get("content")),
        "calls": [_call_signature(call) for call in calls],
        "function_call": [legacy.get("name"), legacy.get("arguments")] if isinstance(legacy, dict) else None,
        "answers": message.get("tool_call_id") or (message.get("name") if message.get("role") == "function" else None),
    }


def _call_signature(call: Any) -> Any:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict):
        return call
    return [call.get("id"), function.get("name"), function.get("arguments")]


def _has_function_calls(messages: Any) -> bool:
    for message in messages if isinstance(messages, list) else ():
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if isinstance(calls, list) and any(isinstance(c, dict) and isinstance(c.get("function"), dict) for c in calls):
            return True
    return False


def _conversations(found: list[Exchange]) -> list[list[Doc]]:
    """Each request's messages followed by the response's first choice."""
    views = []
    for exchange in found:
        items = list(exchange.request.need("messages").elements())
        response = exchange.response
        choices = response.value.get("choices") if response is not None else None
        if isinstance(choices, list) and choices and isinstance(choices[0], dict) and isinstance(choices[0].get("message"), dict):
            items.append(Doc(choices[0]["message"], response.file, f"{response.path}.choices[0].message"))
        views.append(items)
    return views


@register_adapter
class OpenAIChatAdapter(Adapter):
    name = CHAT

    def __init__(self, error_prefixes: tuple[str, ...] = DEFAULT_ERROR_PREFIXES):
        self.error_prefixes = tuple(error_prefixes)

    def _walk(self, messages: Iterable[Doc], builder: Builder) -> None:
        walk_messages(messages, builder, self.error_prefixes)

    @classmethod
    def sniff(cls, probe: Probe) -> bool:
        if CHAT in cassette_apis(probe):
            return True
        data = probe.json()
        if data is None:  # JSON Lines: one request body a line
            data = probe.first_line()
        body = _body(data)
        messages = body.get("messages") if isinstance(body, dict) else body
        return _has_function_calls(messages) and not (isinstance(data, dict) and "suite_name" in data)

    def load(self, path: Path) -> list[Trajectory]:
        if path.suffix.lower() in (".yaml", ".yml"):
            root = read_document(path)
        else:
            roots = read_json_or_lines(path)  # one document, or JSON Lines
            if len(roots) > 1 or path.suffix.lower() == ".jsonl" or _body(roots[0].value) is not roots[0].value:
                return self._body_lines(roots, path)
            root = roots[0]
        if is_cassette(root):
            return cassette_trajectories(root, path, CHAT, _conversations, signature, self._walk)
        messages = root.need("messages") if root.is_dict() else root
        return single_trajectory(root, messages, path, CHAT, list(messages.elements()), self._walk)

    def _body_lines(self, lines: list[Doc], path: Path) -> list[Trajectory]:
        """A run per line: a request body, or a Batch API input line whose ``body`` is one (its
        ``custom_id`` is then the run's id; otherwise the file's name and the line's number)."""
        trajectories = []
        for number, line in enumerate(lines, start=1):
            body = line.need("body") if line.has("body") and not line.has("messages") else line
            messages = body.need("messages")
            builder = Builder()
            self._walk(list(messages.elements()), builder)
            custom_id = line.value.get("custom_id")
            run_id = custom_id if isinstance(custom_id, str) and custom_id.strip() else f"{path.stem}#{number}"
            trajectory = builder.build(line.file, messages.path, trajectory_id=run_id, source_format=CHAT)
            trajectories.append(with_metadata(trajectory, body.as_dict().get("metadata")))
        return require_calls(trajectories, str(path), ROOT, plural(len(lines), "request body"))


def _body(line: Any) -> Any:
    """A JSON Lines entry's request body: the line itself, or a Batch API input line's ``body``."""
    if isinstance(line, dict) and "messages" not in line and isinstance(line.get("body"), dict):
        return line["body"]
    return line
