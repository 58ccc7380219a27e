"""OpenAI Responses API items: recorded cassettes, request/response bodies, or item lists.

Mapping:

- **turns** — consecutive model-side items (assistant ``message``, ``function_call``, ``mcp_call``,
  ``custom_tool_call``, ``reasoning``) form one turn; a user message or a tool output ends it.
- **calls** — ``function_call`` {``call_id``, ``name``, ``arguments`` (a JSON string)}; the call id is
  ``call_id`` (the item's own ``fc_`` id is not what outputs refer to). ``custom_tool_call`` carries one
  free-text ``input``, mapped to ``{"input": ...}``. ``mcp_call`` holds its own output or ``error``.
- **results** — ``function_call_output`` answers the pending call with its ``call_id``. The format has
  no error flag for function outputs: one is an error when its text carries the benchmark's error
  convention, a text prefix — ``Error:`` by default; set ``OpenAIResponsesAdapter(error_prefixes=(...))``,
  or ``()`` to read every output as ok. An ``mcp_call`` with ``error`` is an error.
- A file in which no item is a Responses item (a message, typed or a bare ``role`` and ``content``, or an
  item of the API's kinds: ``function_call``, ``reasoning``, ``*_call``, ``*_call_output``, ``mcp_*``, ...)
  is not a Responses conversation, which is an error; one whose items include no call is a run without calls.
- **principal** — none in the format: the default. **verdict** — none.
- **cassettes** — see :mod:`._cassette`. A request with ``previous_response_id`` continues the
  conversation of that recorded response. The OpenAI Agents SDK's ``/traces/ingest`` uploads in the
  same cassettes are skipped: their function spans repeat the calls already read from the API bodies.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path
from typing import Any

from litmus_replay.replay.model import Trajectory

from ._build import DEFAULT_ERROR_PREFIXES, Builder, error, ok, text_of, text_result
from ._cassette import (
    RESPONSES,
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

_MODEL_SIDE = {"function_call", "mcp_call", "custom_tool_call", "reasoning"}
_OUTPUTS = {"function_call_output", "custom_tool_call_output"}


def walk_items(items: list[Doc], builder: Builder, error_prefixes: tuple[str, ...] = DEFAULT_ERROR_PREFIXES) -> None:
    in_turn = False
    for item in items:
        item.as_dict()
        kind = item.str_at("type") or "message"
        role = item.str_at("role") if kind == "message" else None
        if kind in _MODEL_SIDE or role == "assistant":
            if not in_turn:
                builder.turn()
                in_turn = True
        elif kind == "message" or kind in _OUTPUTS:
            in_turn = False
        _item(kind, role, item, builder, error_prefixes)


def _item(kind: str, role: str | None, item: Doc, builder: Builder, error_prefixes: tuple[str, ...]) -> None:
    if kind == "message" and role == "assistant":
        builder.add_text(text_of(item.opt("content")))
    elif kind == "function_call":
        builder.call(item.need("name").as_name(), item.opt("arguments"), item.id_at("call_id"))
    elif kind == "custom_tool_call":
        raw = item.opt("input")
        arguments = Doc({"input": raw.as_str()}, raw.file, raw.path) if raw is not None else None
        builder.call(item.need("name").as_name(), arguments, item.id_at("call_id"))
    elif kind == "mcp_call":
        failure = item.str_at("error")
        output = text_of(item.opt("output"))
        result = error(failure, output) if failure else ok(output)
        builder.call(item.need("name").as_name(), item.opt("arguments"), item.id_at("id"), result=result)
    elif kind in _OUTPUTS:
        builder.result(item.id_at("call_id"), text_result(text_of(item.opt("output")), error_prefixes))


_ROLES = ("user", "assistant", "system", "developer")


def is_item(value: Any) -> bool:
    """Whether a value is a Responses item at all (of any kind, read or not)."""
    if not isinstance(value, dict):
        return False
    kind = value.get("type")
    if kind is None:
        return value.get("role") in _ROLES
    return isinstance(kind, str) and (
        kind in ("message", "reasoning", "item_reference") or kind.endswith(("_call", "_call_output")) or kind.startswith("mcp_")
    )


def signature(item: Any) -> Any:
    """What identifies an item when comparing conversations (responses add ids and status)."""
    if not isinstance(item, dict):
        return item
    output = item.get("output")
    return {
        "type": item.get("type") or "message",
        "role": item.get("role"),
        "text": plain_text(item.get("content")),
        "call": [item.get("call_id"), item.get("name"), item.get("arguments"), item.get("input")],
        "output": output if isinstance(output, str) else plain_text(output),
    }


def _input_items(body: Doc) -> list[Doc]:
    given = body.opt("input")
    if given is None:
        return []
    if isinstance(given.value, str):
        return [Doc({"role": "user", "content": given.value}, given.file, given.path)]
    return list(given.elements())


def _output_items(response: Doc | None) -> list[Doc]:
    output = response.value.get("output") if response is not None else None
    if not isinstance(output, list):
        return []
    return [Doc(value, response.file, f"{response.path}.output[{i}]") for i, value in enumerate(output)]


def _conversations(found: list[Exchange]) -> list[list[Doc]]:
    """Each request's input (after the conversation it continues) followed by the response output."""
    by_response: dict[str, list[Doc]] = {}
    views = []
    for exchange in found:
        previous = exchange.request.str_at("previous_response_id")
        items = list(by_response.get(previous, [])) if previous else []
        items += _input_items(exchange.request) + _output_items(exchange.response)
        response_id = exchange.response.value.get("id") if exchange.response is not None else None
        if isinstance(response_id, str):
            by_response[response_id] = items
        views.append(items)
    return views


def _has_function_items(items: Any) -> bool:
    return isinstance(items, list) and any(
        isinstance(item, dict) and item.get("type") in ("function_call", "function_call_output", "mcp_call") for item in items
    )


@register_adapter
class OpenAIResponsesAdapter(Adapter):
    name = RESPONSES

    def __init__(self, error_prefixes: tuple[str, ...] = DEFAULT_ERROR_PREFIXES):
        self.error_prefixes = tuple(error_prefixes)

    @classmethod
    def sniff(cls, probe: Probe) -> bool:
        if RESPONSES in cassette_apis(probe):
            return True
        data = probe.json()
        if isinstance(data, dict):
            return _has_function_items(data.get("input")) or _has_function_items(data.get("output"))
        return _has_function_items(data)

    def load(self, path: Path) -> list[Trajectory]:
        root = read_document(path)
        walk = partial(walk_items, error_prefixes=self.error_prefixes)
        if is_cassette(root):
            return cassette_trajectories(root, path, RESPONSES, _conversations, signature, walk)
        if root.is_dict():
            field = root.need("input") if root.has("input") else root.need("output")
            items = _input_items(root)
            if root.has("output"):
                items += list(root.need("output").elements())
        else:
            items, field = list(root.elements()), root
        if not any(is_item(item.value) for item in items):
            field.fail("holds no Responses item (no message, function_call or other item of the API); nothing to replay")
        return single_trajectory(root, field, path, RESPONSES, items, walk)
