"""Model Context Protocol ``tools/call`` traffic: JSON-RPC 2.0 requests and responses.

A file is one JSON message, a JSON array of messages (a batch, or a saved log), or JSON Lines (one
message per line); together they are one trajectory named after the file.

Mapping:

- **calls** — every ``tools/call`` request ``{id, params: {name, arguments}}``, in file order, each in a
  turn of its own: MCP records no assistant turns. Other methods and notifications are skipped.
- **ids** — the JSON-RPC id (a string or a number, kept as text). Each side numbers its own requests,
  so a server's ``ping`` or ``sampling/createMessage`` may share a pending ``tools/call``'s id, and a
  capture does not say which side sent a response. A response answers the earliest pending request with
  its id; an answered request is no longer pending, so an id may be reused. With a ``tools/call`` and
  another request of that id pending, the call takes the response only where that is unambiguous: a
  ``CallToolResult`` (``content`` a list, no ``role`` or ``model``) is the call's, any other result the
  other request's; an error has no shape, so it is the call's only when what follows says so (the next
  response with that id is the other request's, or the client sends that id again), else the other's:
  a call left without its answer is better than one given another's.
- **results** — ``result.isError: true`` makes the result an error whose message is the result's text
  blocks; otherwise the output is ``structuredContent`` when present, else the text blocks joined.
  A JSON-RPC ``error`` object ``{code, message}`` is an error ``"JSON-RPC <code>: <message>"``.
- A response (or a bare ``CallToolResult``) whose request is not in the file counts in
  ``Source.extra["unpaired_results"]``. A file with no request at all holds no run, which is an error:
  one of responses alone (their calls were not captured), or with no JSON-RPC message (nothing with a
  ``method``, ``result`` or ``error``). A session whose requests include no ``tools/call`` is a run
  without calls.
- **principal** — not in the protocol: the default principal, unless a ``notifications/litmus-replay/world``
  notification (the first line of a pair log ``litmus-replay serve`` writes) names the principal, the ambient
  session and the world's key (the run's task). **verdict** — none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litmus_replay.replay.errors import AdapterError
from litmus_replay.replay.model import Trajectory

from ._build import DEFAULT_PRINCIPAL, Builder, error, ok, plural, text_of
from ._doc import Doc, read_json_or_lines
from .base import Adapter, Probe, register_adapter

TOOLS_CALL = "tools/call"
WORLD_NOTICE = "notifications/litmus-replay/world"  # who acted, in which world: a pair log's first line


def _messages(roots: list[Doc]) -> list[Doc]:
    out: list[Doc] = []
    for root in roots:
        out.extend(root.elements() if root.is_list() else [root])
    return out


def _is_bare_result(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("content"), list) and ("isError" in value or "structuredContent" in value)


def _result(result: Doc) -> dict[str, Any]:
    text = text_of(result.opt("content"))
    if result.bool_at("isError"):
        return error(text or "the tool reported an error", text)
    structured = result.opt("structuredContent")
    return ok(structured.value if structured is not None else text)


def _rpc_error(failure: Doc) -> dict[str, Any]:
    code = failure.opt("code")
    message = failure.str_at("message") or "no message"
    prefix = f"JSON-RPC {code.as_id()}" if code is not None else "JSON-RPC error"
    data = failure.value.get("data")
    return error(f"{prefix}: {message}", data)


def _walk(messages: list[Doc], builder: Builder) -> dict[str, str]:
    """Calls and results into ``builder``; returns what a world notification says (``principal``,
    ``ambient_session``, ``task``)."""
    pending: list[tuple[str, bool]] = []  # (id, is a tools/call) of every request not yet answered, in file order
    acting: dict[str, str] = {}
    for index, message in enumerate(messages):
        message.as_dict()
        method = message.str_at("method")
        if method == WORLD_NOTICE:
            params = message.opt("params")
            for name, key in (("principal", "principal"), ("ambient_session", "ambient_session"), ("world", "task")):
                value = params.value.get(name) if params is not None and isinstance(params.value, dict) else None
                if isinstance(value, str) and value:
                    acting[key] = value
        if method is not None:
            request_id = message.id_at("id")
            if method == TOOLS_CALL:
                params = message.need("params")
                builder.turn()
                builder.call(params.need("name").as_name(), params.opt("arguments"), request_id)
            if request_id is not None:  # without an id it is a notification: nothing answers it
                pending.append((request_id, method == TOOLS_CALL))
        elif message.has("result") or message.has("error"):
            _response(messages, index, pending, builder)
        elif _is_bare_result(message.value):
            builder.unpaired_results += 1
    return acting


def _response(messages: list[Doc], index: int, pending: list[tuple[str, bool]], builder: Builder) -> None:
    message = messages[index]
    response_id = message.id_at("id")  # JSON-RPC answers id null when it could not read the request
    candidates = [at for at, (request_id, _) in enumerate(pending) if request_id == response_id]
    if response_id is None or not candidates:
        builder.unpaired_results += 1
        return
    calls = [at for at in candidates if pending[at][1]]
    others = [at for at in candidates if not pending[at][1]]
    if calls and others:
        chosen = calls[0] if _answers_call(messages, index, response_id) else others[0]
    else:
        chosen = candidates[0]
    _, is_call = pending.pop(chosen)
    if is_call:
        failure = message.opt("error")
        outcome = _rpc_error(failure) if failure is not None else _result(message.need("result"))
        builder.result(response_id, outcome)


# Requests only a server sends; a client's own are every other method but ping, which both sides send.
_SERVER_REQUESTS = frozenset({"sampling/createMessage", "roots/list", "elicitation/create"})
_CALL, _OTHER = "call", "other"


def _id_text(value: Any) -> str | None:
    return str(value) if isinstance(value, (str, int, float)) and not isinstance(value, bool) else None


def _shape(message: Any) -> str | None:
    """Whose answer a response is by its result: a tools/call's, another request's, or (an error) unknown."""
    result = message.get("result") if isinstance(message, dict) and "error" not in message else None
    if not isinstance(result, dict):
        return None
    if isinstance(result.get("content"), list) and "role" not in result and "model" not in result:
        return _CALL
    return _OTHER


def _answers_call(messages: list[Doc], index: int, response_id: str) -> bool:
    """Whether the response at ``index``, with a tools/call and another request of its id pending, is the call's."""
    shape = _shape(messages[index].value)
    if shape is not None:
        return shape == _CALL
    for later in messages[index + 1 :]:
        value = later.value
        if not isinstance(value, dict) or _id_text(value.get("id")) != response_id:
            continue
        method = value.get("method")
        if isinstance(method, str):
            if method == "ping":
                continue  # either side's: says nothing
            return method not in _SERVER_REQUESTS  # a side reuses an id only once its request is answered
        return _shape(value) == _OTHER  # the next answer is the other request's: this one is the call's
    return False


@register_adapter
class MCPAdapter(Adapter):
    name = "mcp"

    @classmethod
    def sniff(cls, probe: Probe) -> bool:
        data = probe.json()
        if data is None:
            data = probe.first_line()
        first = data[0] if isinstance(data, list) and data else data
        return (isinstance(first, dict) and first.get("jsonrpc") == "2.0") or _is_bare_result(first)

    def load(self, path: Path) -> list[Trajectory]:
        roots = read_json_or_lines(path)
        builder = Builder()
        messages = _messages(roots)
        acting = _walk(messages, builder)
        field = roots[0].path
        if not any(isinstance(m.value.get("method"), str) for m in messages):
            unpaired = builder.unpaired_results
            if unpaired:
                what = f"{plural(unpaired, 'result')} but no request (no tools/call was captured)"
            else:
                what = "no JSON-RPC message (nothing with a method, result or error)"
            raise AdapterError(str(path), field, f"holds {what}; nothing to replay")
        trajectory = builder.build(str(path), field, trajectory_id=path.stem, source_format=self.name,
                                   principal=acting.get("principal", DEFAULT_PRINCIPAL), task=acting.get("task"))
        if "ambient_session" in acting:
            trajectory = trajectory.model_copy(update={"ambient_session": acting["ambient_session"]})
        return [trajectory]
