"""Anthropic Messages conversations: recorded cassettes, request bodies, or message lists.

Mapping:

- **turns** — each assistant message is a turn: its text blocks are the turn's text, its ``tool_use``
  blocks (``id``, ``name``, ``input`` object) its calls.
- **results** — ``tool_result`` blocks in user messages answer the pending call with their
  ``tool_use_id``; ``is_error: true`` makes the result an error whose message is the block's text.
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


def walk_messages(messages: list[Doc], builder: Builder) -> None:
    for message in messages:
        role = message.need("role").as_str()
        content = message.opt("content")
        if role == "assistant":
            _assistant(content, builder)
        elif content is not None and content.is_list():
            for block in content.elements():
                if block.is_dict() and block.value.get("type") == "tool_result":
                    _result(block, builder)


def _assistant(content: Doc | None, builder: Builder) -> None:
    builder.turn(text_of(content))
    if content is None or not content.is_list():
        return
    for block in content.elements():
        if block.is_dict() and block.value.get("type") in ("tool_use", "server_tool_use"):
            builder.call(block.need("name").as_name(), block.opt("input"), block.id_at("id"))


def _result(block: Doc, builder: Builder) -> None:
    text = text_of(block.opt("content"))
    result = error(text, text) if block.bool_at("is_error") else ok(text)
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


def _has_tool_blocks(messages: Any) -> bool:
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result") for b in content):
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
