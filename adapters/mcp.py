"""Model Context Protocol ``tools/call`` traffic: JSON-RPC 2.0 requests and responses.

A file is one JSON message, a JSON array of messages (a batch, or a saved log), or JSON Lines (one
message per line); together they are one trajectory named after the file.

Mapping:

- **calls** — every ``tools/call`` request ``{id, params: {name, arguments}}``, in file order, each in a
  turn of its own: MCP records no assistant turns. Other methods and notifications are skipped.
- **ids** — the JSON-RPC id (a string or a number, kept as text). A response answers the earliest
  pending request with its id, so an id reused after its answer is read correctly.
- **results** — ``result.isError: true`` makes the result an error whose message is the result's text
  blocks; otherwise the output is ``structuredContent`` when present, else the text blocks joined.
  A JSON-RPC ``error`` object ``{code, message}`` is an error ``"JSON-RPC <code>: <message>"``.
- A response (or a bare ``CallToolResult``) whose request is not in the file counts in
  ``Source.extra["unpaired_results"]``; a file with no request holds no tool call, which is an error.
- **principal** — not in the protocol: the default principal. **verdict** — none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litmus_replay.replay.model import Trajectory

from ._build import Builder, error, ok, plural, require_calls, text_of
from ._doc import Doc, read_json_or_lines
from .base import Adapter, Probe, register_adapter

TOOLS_CALL = "tools/call"


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


def _walk(messages: list[Doc], builder: Builder) -> None:
    other_requests: set[str] = set()
    for message in messages:
        message.as_dict()
        method = message.str_at("method")
        if method == TOOLS_CALL:
            params = message.need("params")
            builder.turn()
            builder.call(params.need("name").as_name(), params.opt("arguments"), message.id_at("id"))
        elif method is not None:
            if message.id_at("id") is not None:
                other_requests.add(message.id_at("id"))
        elif message.has("result") or message.has("error"):
            _response(message, builder, other_requests)
        elif _is_bare_result(message.value):
            builder.unpaired_results += 1


def _response(message: Doc, builder: Builder, other_requests: set[str]) -> None:
    call_id = message.id_at("id")
    if call_id in other_requests:
        return  # answers initialize, tools/list, ...
    if call_id is None:  # JSON-RPC answers id null when it could not read the request
        builder.unpaired_results += 1
        return
    failure = message.opt("error")
    outcome = _rpc_error(failure) if failure is not None else _result(message.need("result"))
    builder.result(call_id, outcome)


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
        _walk(_messages(roots), builder)
        field = roots[0].path
        trajectory = builder.build(str(path), field, trajectory_id=path.stem, source_format=self.name)
        unpaired = builder.unpaired_results
        detail = f"{plural(unpaired, 'result')} without a tools/call request" if unpaired else "no tools/call request"
        return require_calls([trajectory], str(path), field, detail)
