"""Recorded HTTP cassettes (VCR.py YAML) of model API calls, turned into conversations.

A cassette holds ``interactions``, each a request body and a response body. For the chat-style APIs the
request carries the whole history so far and the response the next assistant message, so each
interaction yields one conversation: the request's history followed by the response. A conversation
that is a prefix of a later one is the same run seen earlier and is dropped; what is left is one
conversation per run (the last, longest view of it), each becoming one trajectory. Interactions with
other endpoints (trace ingestion, file uploads) are skipped. Response bodies may be gzip-compressed
``!!binary``; a streamed response (``stream: true``, server-sent events) is assembled into the body it
amounts to (see :mod:`._sse`). A response that cannot be decoded, or is an HTTP error, contributes
nothing (the next request repeats its message anyway), while a request that does not parse is an error.
"""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

import yaml

from litmus_replay.replay.errors import AdapterError
from litmus_replay.replay.model import VERDICT_KINDS, OriginalVerdict, Trajectory

from ._build import Builder, plural, require_calls
from ._doc import ROOT, Doc, decode_text, one_line, parse_json, read_bytes, read_json
from ._sse import assemble, looks_like_sse

CHAT, RESPONSES, ANTHROPIC = "openai-chat", "openai-responses", "anthropic"

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass
class Exchange:
    """One recorded model call: its request body and, when usable, its response body."""

    request: Doc
    response: Doc | None


def _get(value: Any, key: str) -> Any:
    return value.get(key) if isinstance(value, dict) else None


def _blocks(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def body_text(value: Any) -> str | bytes | None:
    """The body as text (gunzipped when needed); bytes back when it is not text; None when absent."""
    if isinstance(value, dict) and "string" in value:  # VCR.py stores response bodies as {string: ...}
        value = value["string"]
    if isinstance(value, bytes):
        if value[:2] == b"\x1f\x8b":
            try:
                value = gzip.decompress(value)
            except (OSError, EOFError, zlib.error):
                return value
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return value
    return value if isinstance(value, str) else None


def _loads(text: Any) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


def _message_hints(messages: Any) -> set[str]:
    """Chat or Anthropic, from the shape of the messages, when the URL does not say."""
    hints: set[str] = set()
    for message in _blocks(messages):
        if _get(message, "tool_calls") or _get(message, "role") == "tool":
            hints.add(CHAT)
        for block in _blocks(_get(message, "content")):
            if _get(block, "type") in ("tool_use", "tool_result"):
                hints.add(ANTHROPIC)
    return hints


def api_of(uri: Any, body: Any) -> frozenset[str]:
    """Which API a recorded request went to: by URL path, else by the shape of its body."""
    path = urlsplit(uri).path.rstrip("/") if isinstance(uri, str) else ""
    if path.endswith("/chat/completions"):
        return frozenset({CHAT})
    if path.endswith("/responses"):
        return frozenset({RESPONSES})
    if path.endswith("/messages") and "/threads/" not in path:
        return frozenset({ANTHROPIC})
    if not isinstance(body, dict):
        return frozenset()
    if "anthropic_version" in body:
        return frozenset({ANTHROPIC})
    if isinstance(body.get("input"), (list, str)) and "model" in body:
        return frozenset({RESPONSES})
    if isinstance(body.get("messages"), list):
        hints = _message_hints(body["messages"])
        if isinstance(body.get("system"), (str, list)):
            hints.add(ANTHROPIC)
        return frozenset(hints or {CHAT, ANTHROPIC})
    return frozenset()


def cassette_apis(probe: Any) -> set[str]:
    """The APIs a cassette's interactions went to (empty when the file is not a cassette)."""
    if "cassette_apis" not in probe.cache:
        apis: set[str] = set()
        data = probe.json() if isinstance(probe.json(), dict) else probe.yaml()
        for interaction in _blocks(_get(data, "interactions")):
            request = _get(interaction, "request")
            apis |= api_of(_get(request, "uri"), _loads(body_text(_get(request, "body"))))
        probe.cache["cassette_apis"] = apis
    return probe.cache["cassette_apis"]


def read_document(path: Path) -> Doc:
    """A YAML cassette, or a JSON file (which may itself be a JSON cassette)."""
    if path.suffix.lower() in (".yaml", ".yml"):
        return read_cassette(path)
    return Doc(read_json(path), str(path))


def is_cassette(root: Doc) -> bool:
    return root.is_dict() and "interactions" in root.value


def read_cassette(path: Path) -> Doc:
    file = str(path)
    text = decode_text(read_bytes(path), file)
    try:
        data = yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else ROOT
        raise AdapterError(file, where, one_line(f"not valid YAML: {getattr(exc, 'problem', None) or exc}")) from None
    except (ValueError, RecursionError) as exc:  # e.g. a timestamp or number the loader cannot build
        raise AdapterError(file, ROOT, one_line(f"not valid YAML: {exc}")) from None
    return Doc(data, file)


def exchanges(root: Doc, api: str) -> list[Exchange]:
    """The cassette's POSTs to ``api``, request bodies parsed (strictly), responses leniently."""
    out = []
    for interaction in root.need("interactions").elements():
        request = interaction.need("request")
        method = request.opt("method")
        if method is not None and method.as_str().upper() != "POST":
            continue  # GETs and DELETEs carry no conversation
        uri = request.opt("uri")
        body = request.opt("body")
        if body is None:
            continue  # no body, no conversation
        raw = body_text(body.value)
        if not isinstance(raw, str):
            body.fail("expected the request body as text (JSON)")
        if api not in api_of(uri.as_str() if uri is not None else None, _loads(raw)):
            continue
        request_doc = Doc(parse_json(raw, root.file, body.path), root.file, body.path)
        request_doc.as_dict()
        out.append(Exchange(request_doc, _response(interaction, api)))
    return out


def _response(interaction: Doc, api: str) -> Doc | None:
    response = interaction.value.get("response") if isinstance(interaction.value, dict) else None
    status = _get(_get(response, "status"), "code")
    if isinstance(status, int) and not isinstance(status, bool) and status >= 400:
        return None
    text = body_text(_get(response, "body"))
    data = _loads(text)
    if data is None and isinstance(text, str) and looks_like_sse(text):
        data = assemble(api, text)
    if not isinstance(data, dict):
        return None
    return Doc(data, interaction.file, f"{interaction.path}.response.body")


def distinct_runs(conversations: list[list[Doc]], signature: Callable[[Any], Any]) -> list[int]:
    """Indices of the conversations that are not a prefix (or an earlier copy) of another one."""
    sigs = [tuple(json.dumps(signature(item.value), sort_keys=True, default=str) for item in c) for c in conversations]
    keep = []
    for i, mine in enumerate(sigs):
        covered = any(
            j != i and (len(other) > len(mine) or j > i) and other[: len(mine)] == mine
            for j, other in enumerate(sigs)
        )
        if not covered:
            keep.append(i)
    return keep


def plain_text(content: Any) -> str | None:
    """Text of a content value, for comparing conversations only (never raises)."""
    if isinstance(content, str):
        return content or None
    parts = []
    for block in _blocks(content):
        for key in ("text", "content"):
            if isinstance(_get(block, key), str):
                parts.append(block[key])
                break
    return "\n".join(parts) or None


def cassette_trajectories(
    root: Doc,
    path: Path,
    api: str,
    conversations: Callable[[list[Exchange]], list[list[Doc]]],
    signature: Callable[[Any], Any],
    walk: Callable[[list[Doc], Builder], None],
) -> list[Trajectory]:
    """One trajectory per distinct run among the cassette's ``api`` interactions."""
    found = exchanges(root, api)
    views = conversations(found)
    trajectories = []
    for number, index in enumerate(distinct_runs(views, signature), start=1):
        builder = Builder()
        walk(views[index], builder)
        model = found[index].request.value.get("model")
        trajectories.append(
            builder.build(
                root.file,
                found[index].request.path,
                trajectory_id=f"{path.stem}#{number}",
                source_format=api,
                extra={"model": model if isinstance(model, str) else None, "last_request": found[index].request.path},
            )
        )
        trajectories[-1] = with_metadata(trajectories[-1], found[index].request.value.get("metadata"))
    return require_calls(trajectories, root.file, "interactions", plural(len(found), f"{api} request"))


def single_trajectory(root: Doc, field: Doc, path: Path, api: str, items: list[Doc], walk: Callable[[list[Doc], Builder], None]) -> list[Trajectory]:
    """A plain JSON conversation (not a cassette): one trajectory named after the file."""
    builder = Builder()
    walk(items, builder)
    trajectory = builder.build(root.file, field.path, trajectory_id=path.stem, source_format=api)
    trajectory = with_metadata(trajectory, root.value.get("metadata") if root.is_dict() else None)
    return require_calls([trajectory], root.file, field.path)


METADATA_FIELDS = ("task", "principal", "ambient_session")


def with_metadata(trajectory: Trajectory, metadata: Any) -> Trajectory:
    """The trajectory with what a request body's ``metadata`` says of its task, principal, session and
    verdict: every API here takes a free-form ``metadata`` object, and harnesses record the run's there."""
    if not isinstance(metadata, dict):
        return trajectory
    update: dict[str, Any] = {key: metadata[key] for key in METADATA_FIELDS if _text(metadata.get(key))}
    if _text(metadata.get("verdict")):
        kind = metadata.get("verdict_kind")
        update["original_verdict"] = OriginalVerdict(label=metadata["verdict"],
                                                     kind=kind if kind in VERDICT_KINDS else "unknown")
    return trajectory.model_copy(update=update) if update else trajectory


def _text(value: Any) -> bool:
    return isinstance(value, str) and bool(value.strip())
