"""Anthropic Messages conversations: recorded cassettes, request bodies, or message lists.

Mapping:

- **turns** — each assistant message is a turn: its text blocks are the turn's text, its ``tool_use``,
  ``server_tool_use`` and ``mcp_tool_use`` blocks (``id``, ``name``, ``input`` object; the MCP
  connector's ``server_name`` has no place in a call) its calls. Any other block whose type ends in
  ``tool_use`` is a call too when it has a ``name``; without one it is counted in
  ``Source.extra["unread_blocks"]``, never dropped unseen. Other blocks (thinking, images) are skipped.
- **results** — a block whose type ends in ``tool_result`` (``tool_result`` and ``mcp_tool_result`` in
  user or assistant messages, server tools' ``web_search_tool_result``, ``code_execution_tool_result``,
  ... in the assistant message beside their call) answers the pending call with its ``tool_use_id``;
  ``is_error: true`` makes the result an error whose message is the block's text. A server tool's
  result that is not text keeps its content as recorded; an error object (a type ending in ``_error``)
  makes it an error whose message is the object's ``error_code``.
- **principal** — none in the format: the default principal. **verdict** — none.
- **cassettes** — see :mod:`._cassette`: one trajectory per run, the request history plus the response
  message (a ``tool_use`` in the last response has no recorded result).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litmus_replay.replay.model import Trajectory

from ._build import Builder, error, ok, text_of
from ._cassette import (
    ANTHROPIC,
    Exchange,
    cassette_apis,
    cassette_trajectories,
    is_cassette,
    plain_text,
    read_document,
    single_trajectory,
)
from ._doc import Doc
from .base import Adapter, Probe, register_adapter


_CALLS = ("tool_use", "server_tool_use", "mcp_tool_use")
_TEXT_RESULTS = ("tool_result", "mcp_tool_result")


def walk_messages(messages: list[Doc], builder: Builder) -> None:
    for message in messages:
        role = message.need("role").as_str()
        content = message.opt("content")
        if role == "assistant":
            builder.turn(text_of(content))
        if content is None or not content.is_list():
            continue
        for block in content.elements():
            kind = block.value.get("type") if block.is_dict() else None
            if not isinstance(kind, str):
                continue
            if kind.endswith("tool_use") and role == "assistant":
                _call(block, kind, builder)
            elif kind.endswith("tool_use"):
                builder.skip(kind)  # only the model calls tools: one outside its messages is not read
            elif kind.endswith("tool_result"):
                _result(block, kind, builder)


def _call(block: Doc, kind: str, builder: Builder) -> None:
    name = block.value.get("name")
    if kind in _CALLS or (isinstance(name, str) and name.strip()):
        builder.call(block.need("name").as_name(), block.opt("input"), block.id_at("id"))
    else:
        builder.skip(kind)


def _all_text(value: Any) -> bool:
    if isinstance(value, list):
        return all(isinstance(block, dict) and block.get("type") == "text" for block in value)
    return isinstance(value, str)


def _result(block: Doc, kind: str, builder: Builder) -> None:
    content = block.opt("content")
    if kind in _TEXT_RESULTS or content is None or _all_text(content.value):
        text = text_of(content)
        result = error(text, text) if block.bool_at("is_error") else ok(text)
    else:  # a server tool's own result object (search results, code output) or its error object
        value = content.value
        failure = isinstance(value, dict) and isinstance(value.get("type"), str) and value["type"].endswith("_error")
        code = value.get("error_code") if failure else None
        if failure or block.bool_at("is_error"):
            result = error(code if isinstance(code, str) else None, value)
        else:
            result = ok(value)
    builder.result(block.id_at("tool_use_id"), result)


def signature(message: Any) -> Any:
    """What identifies a message when comparing conversations."""
    if not isinstance(message, dict):
        return message
    content = message.get("content")
    blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
    out = []
    for block in blocks:
        if not isinstance(block, dict):
            out.append(block)
            continue
        out.append([block.get(key) for key in ("type", "text", "id", "name", "input", "tool_use_id", "is_error")]
                   + [plain_text(block.get("content"))])
    return {"role": message.get("role"), "blocks": out}


def _conversations(found: list[Exchange]) -> list[list[Doc]]:
    """Each request's messages followed by the response message."""
    views = []
    for exchange in found:
        items = list(exchange.request.need("messages").elements())
        response = exchange.response
        if response is not None and response.value.get("role") == "assistant" and isinstance(response.value.get("content"), list):
            items.append(response)
        views.append(items)
    return views


def _is_tool_block(kind: Any) -> bool:
    return isinstance(kind, str) and kind.endswith(("tool_use", "tool_result"))


def _has_tool_blocks(messages: Any) -> bool:
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(isinstance(b, dict) and _is_tool_block(b.get("type")) for b in content):
            return True
    return False


@register_adapter
class AnthropicAdapter(Adapter):
    name = ANTHROPIC

    @classmethod
    def sniff(cls, probe: Probe) -> bool:
        if ANTHROPIC in cassette_apis(probe):
            return True
        data = probe.json()
        return _has_tool_blocks(data.get("messages") if isinstance(data, dict) else data)

    def load(self, path: Path) -> list[Trajectory]:
        root = read_document(path)
        if is_cassette(root):
            return cassette_trajectories(root, path, ANTHROPIC, _conversations, signature, walk_messages)
        messages = root.need("messages") if root.is_dict() else root
        return single_trajectory(root, messages, path, ANTHROPIC, list(messages.elements()), walk_messages)
