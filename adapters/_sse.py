"""Streamed model responses (``stream: true``): server-sent events assembled into the body the same call
would have returned unstreamed, so a streamed cassette reads like any other.

- **Chat Completions** — ``chat.completion.chunk`` deltas: the first choice's ``content`` pieces are
  joined; ``tool_calls`` pieces are gathered by their ``index`` (``id`` and ``function.name`` from the
  first piece, ``function.arguments`` joined); the legacy ``function_call`` likewise.
- **Responses** — the ``response.completed`` (or ``response.incomplete``/``response.failed``) event's
  ``response``; without one (a recording cut short) the ``response.output_item.done`` items, and for
  items that never finished, ``response.output_item.added`` plus their argument and text deltas.
- **Anthropic Messages** — ``message_start``'s message, each ``content_block_start`` block with its
  ``text_delta`` pieces joined and its ``input_json_delta`` pieces joined and parsed as the input.

Assembly never raises: an event that does not parse is skipped; what cannot be assembled is left out.
"""

from __future__ import annotations

import json
from typing import Any

CHAT, RESPONSES, ANTHROPIC = "openai-chat", "openai-responses", "anthropic"


def looks_like_sse(text: str) -> bool:
    head = text.lstrip()[:200]
    return head.startswith(("data:", "event:", "id:", ":"))


def events(text: str) -> list[dict[str, Any]]:
    """The JSON ``data`` of each event, in order (``[DONE]`` and unparsable data are skipped)."""
    out: list[dict[str, Any]] = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        data = [line[5:].lstrip(" ") for line in block.split("\n") if line.startswith("data:")]
        if not data:
            continue
        payload = "\n".join(data).strip()
        if payload == "[DONE]":
            continue
        try:
            value = json.loads(payload)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def assemble(api: str, text: str) -> dict[str, Any] | None:
    """The response body a streamed call amounts to, or None when the stream holds nothing usable."""
    found = events(text)
    if not found:
        return None
    if api == CHAT:
        return _chat(found)
    if api == RESPONSES:
        return _responses(found)
    if api == ANTHROPIC:
        return _anthropic(found)
    return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _chat(chunks: list[dict[str, Any]]) -> dict[str, Any] | None:
    message: dict[str, Any] = {"role": "assistant", "content": None}
    calls: dict[int, dict[str, Any]] = {}
    legacy: dict[str, str] | None = None
    text: list[str] = []
    seen = False
    for chunk in chunks:
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            seen = True
            delta = _dict(choice.get("delta"))
            text.append(_text(delta.get("content")))
            for piece in delta.get("tool_calls") or []:
                if not isinstance(piece, dict):
                    continue
                index = piece.get("index", len(calls))
                call = calls.setdefault(index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
                if piece.get("id"):
                    call["id"] = piece["id"]
                function = _dict(piece.get("function"))
                if function.get("name"):
                    call["function"]["name"] = function["name"]
                call["function"]["arguments"] += _text(function.get("arguments"))
            if isinstance(delta.get("function_call"), dict):
                legacy = legacy or {"name": "", "arguments": ""}
                legacy["name"] = delta["function_call"].get("name") or legacy["name"]
                legacy["arguments"] += _text(delta["function_call"].get("arguments"))
    if not seen:
        return None
    message["content"] = "".join(text) or None
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    if legacy is not None:
        message["function_call"] = legacy
    return {"object": "chat.completion", "choices": [{"index": 0, "message": message}]}


_FINAL = ("response.completed", "response.incomplete", "response.failed")


def _responses(stream: list[dict[str, Any]]) -> dict[str, Any] | None:
    final = next((e for e in reversed(stream) if e.get("type") in _FINAL and isinstance(e.get("response"), dict)), None)
    if final is not None and isinstance(final["response"].get("output"), list):
        return final["response"]
    started = next((e["response"] for e in stream if isinstance(e.get("response"), dict)), {})
    items: dict[int, dict[str, Any]] = {}
    done: set[int] = set()
    for event in stream:
        kind, index = event.get("type"), event.get("output_index")
        if not isinstance(index, int):
            continue
        if kind == "response.output_item.done" and isinstance(event.get("item"), dict):
            items[index] = dict(event["item"])
            done.add(index)
        elif index in done:
            continue
        elif kind == "response.output_item.added" and isinstance(event.get("item"), dict):
            items[index] = dict(event["item"])
        elif kind == "response.function_call_arguments.delta" and index in items:
            items[index]["arguments"] = _text(items[index].get("arguments")) + _text(event.get("delta"))
        elif kind == "response.function_call_arguments.done" and index in items:
            items[index]["arguments"] = _text(event.get("arguments"))
        elif kind == "response.output_text.delta" and index in items:
            content = items[index].setdefault("content", [])
            if not content:
                content.append({"type": "output_text", "text": ""})
            content[-1]["text"] = _text(content[-1].get("text")) + _text(event.get("delta"))
    if not items:
        return None
    return {**started, "output": [items[i] for i in sorted(items)]}


def _anthropic(stream: list[dict[str, Any]]) -> dict[str, Any] | None:
    start = next((e for e in stream if e.get("type") == "message_start" and isinstance(e.get("message"), dict)), None)
    message: dict[str, Any] = dict(start["message"]) if start else {"role": "assistant"}
    blocks: dict[int, dict[str, Any]] = {}
    partial: dict[int, str] = {}
    for event in stream:
        kind, index = event.get("type"), event.get("index")
        if not isinstance(index, int):
            continue
        if kind == "content_block_start" and isinstance(event.get("content_block"), dict):
            blocks[index] = dict(event["content_block"])
        elif kind == "content_block_delta" and index in blocks:
            delta = _dict(event.get("delta"))
            if delta.get("type") == "text_delta":
                blocks[index]["text"] = _text(blocks[index].get("text")) + _text(delta.get("text"))
            elif delta.get("type") == "input_json_delta":
                partial[index] = partial.get(index, "") + _text(delta.get("partial_json"))
    for index, raw in partial.items():
        if raw.strip():
            try:
                blocks[index]["input"] = json.loads(raw)
            except (ValueError, RecursionError):
                blocks[index]["input"] = raw  # what the model emitted; the adapter reports it as unparsed
    if start is None and not blocks:
        return None
    message["role"] = "assistant"
    message["content"] = [blocks[i] for i in sorted(blocks)]
    return message
