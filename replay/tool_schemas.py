"""The tools a world offers an agent, each with a JSON Schema of its arguments, read from the tool's
declaration (its signature and docstring): the domains' tools as they are, and a binding's tool under the
benchmark's own name and argument names, the arguments its binding fixes left out.

What a live front-end lists (``serve``'s ``tools/list``) and checks a call's arguments against before
the call reaches a world. A type the declaration leaves open (``Any``) is left open in the schema.
"""

from __future__ import annotations

import inspect
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable

from litmus_replay.envs.domain import domain_class, domain_names

from .bindings import Bindings
from .tools import _json_name, world_tools

__all__ = ["OfferedTool", "argument_problem", "offered_tools"]

_JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", list: "array", dict: "object"}


@dataclass(frozen=True)
class OfferedTool:
    """One tool as an agent sees it: its name, what it does, and the schema of its arguments."""

    name: str
    description: str
    input_schema: dict[str, Any]


def offered_tools(world: Mapping[str, Any], bindings: Bindings | None = None) -> list[OfferedTool]:
    """Every tool of the world's domains, then every bound tool, each once, in name order within each."""
    methods = world_tools(world)
    domains = {tool: name for name in world if name in domain_names() for tool in domain_class(name, "real").tools}
    offered = [OfferedTool(name, _description(method, domains.get(name)), _schema(method))
               for name, method in sorted(methods.items())]
    for name, binding in sorted((bindings or Bindings()).by_tool.items()):
        method = methods.get(binding.to)
        if method is None:
            continue
        schema = _schema(method)
        renamed = {domain: recorded for recorded, domain in binding.spec.args.items()}
        fixed = set(binding.spec.const)
        properties = {renamed.get(arg, arg): value for arg, value in schema["properties"].items() if arg not in fixed}
        required = [renamed.get(arg, arg) for arg in schema.get("required", []) if arg not in fixed]
        properties.update({name: {} for name in binding.spec.drop})  # taken, and not passed on
        bound = {"type": "object", "properties": properties, "additionalProperties": schema["additionalProperties"]}
        if required:
            bound["required"] = required
        offered.append(OfferedTool(name, f"{_description(method, domains.get(binding.to))} (as {binding.to})", bound))
    return offered


def argument_problem(tool: OfferedTool, arguments: Any) -> str | None:
    """What is wrong with a call's arguments for this tool, in words, or None when they fit its schema."""
    if not isinstance(arguments, Mapping):
        return "the arguments must be an object"
    schema = tool.input_schema
    missing = [name for name in schema.get("required", []) if name not in arguments]
    if missing:
        return f"missing argument(s) {', '.join(missing)}"
    properties = schema["properties"]
    if schema.get("additionalProperties") is False:
        unknown = sorted(name for name in arguments if name not in properties)
        if unknown:
            return f"no argument(s) {', '.join(unknown)}; it takes: {', '.join(properties) or '(none)'}"
    for name, value in arguments.items():
        wanted = properties.get(name, {}).get("type")
        if wanted is not None and not _fits(value, wanted):
            return f"argument {name!r}: expected {' or '.join(wanted) if isinstance(wanted, list) else wanted}"
    return None


def _fits(value: Any, wanted: str | list[str]) -> bool:
    names = wanted if isinstance(wanted, list) else [wanted]
    for name in names:
        if name == "null" and value is None:
            return True
        if name == "boolean" and isinstance(value, bool):
            return True
        if name == "integer" and isinstance(value, int) and not isinstance(value, bool):
            return True
        if name == "number" and isinstance(value, (int, float)) and not isinstance(value, bool):
            return True
        if name == "string" and isinstance(value, str):
            return True
        if name == "array" and isinstance(value, list):
            return True
        if name == "object" and isinstance(value, Mapping):
            return True
    return False


def _description(method: Callable[..., Any], domain: str | None) -> str:
    """The first paragraph of the tool's docstring, else which domain's tool it is."""
    doc = (inspect.getdoc(method) or "").split("\n\n", 1)[0].replace("\n", " ").strip()
    return doc or (f"{method.__name__} of the {domain} domain" if domain else method.__name__)


def _schema(method: Callable[..., Any]) -> dict[str, Any]:
    """The JSON Schema of a domain tool method's arguments (after ``self`` and the call)."""
    try:
        signature = inspect.signature(method)
    except (TypeError, ValueError):
        return {"type": "object", "properties": {}, "additionalProperties": True}
    try:
        hints = typing.get_type_hints(method)
    except Exception:  # an annotation that does not resolve here leaves its argument open
        hints = {}
    parameters = list(signature.parameters.values())[2:]
    properties: dict[str, Any] = {}
    required = []
    for parameter in parameters:
        if parameter.kind not in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            continue
        name = _json_name(parameter.name)
        properties[name] = _type_schema(hints.get(parameter.name, Any))
        if parameter.default is inspect.Parameter.empty:
            required.append(name)
        elif _plain(parameter.default):
            properties[name]["default"] = parameter.default
    open_ended = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": open_ended}
    if required:
        schema["required"] = required
    return schema


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def _type_schema(hint: Any) -> dict[str, Any]:
    """A JSON Schema for one annotation: JSON's own types, optional ones, and ``Any`` left open."""
    if hint is Any:
        return {}
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        names = []
        for member in typing.get_args(hint):
            if member is type(None):
                names.append("null")
                continue
            name = _JSON_TYPES.get(typing.get_origin(member) or member)
            if name is None:
                return {}
            names.append(name)
        return {"type": names}
    name = _JSON_TYPES.get(origin or hint)
    return {"type": name} if name else {}
