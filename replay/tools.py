"""The tools a world offers: every domain tool of the domains its spec names, with the arguments each takes.

Read on the host from the registered domain classes, without building a world, so the replay can tell a
known tool from an unknown one and a binding can be checked against the tool it names.
"""

from __future__ import annotations

import inspect
import keyword
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from litmus_replay.envs.domain import domain_class, domain_names

__all__ = ["Argument", "all_tools", "answers_unknown_tools", "domain_unavailable", "tool_arguments", "world_tools"]


def world_tools(world: Mapping[str, Any]) -> dict[str, Callable[..., Any]]:
    """Tool name -> the real semantics' tool method, for the domains the world spec names."""
    names = set(domain_names())
    tools: dict[str, Callable[..., Any]] = {}
    for name in world:
        if name in names:
            tools.update(domain_class(name, "real").tools)
    return tools


def answers_unknown_tools(world: Mapping[str, Any]) -> bool:
    """Whether a domain the world spec names answers calls of tools it does not have (its benchmark refuses
    them: ``Declaration.answers_unknown_tools``), so no call of the world is of a tool nobody knows."""
    names = set(domain_names())
    return any(domain_class(name, "real").declaration.answers_unknown_tools for name in world if name in names)


def all_tools() -> dict[str, dict[str, Callable[..., Any]]]:
    """Domain name -> its tools (real semantics), for every registered domain."""
    found: dict[str, dict[str, Callable[..., Any]]] = {}
    for name in domain_names():
        for semantics in ("real", "stub"):  # a plug-in may register one semantics only
            try:
                found[name] = dict(domain_class(name, semantics).tools)
                break
            except LookupError:
                continue
    return found


def domain_unavailable(name: str) -> str | None:
    """Why a registered domain cannot run in this Python, in words, or None: a domain class may say so with
    a static ``unavailable()`` (a bridge whose benchmark's package is not installed; its tools, named
    statically, are listed all the same, without their arguments)."""
    for semantics in ("real", "stub"):
        try:
            check = getattr(domain_class(name, semantics), "unavailable", None)
        except LookupError:
            continue
        return check() if callable(check) else None
    return None


@dataclass(frozen=True)
class Argument:
    """One argument of a domain tool, as a recorded call names it."""

    name: str
    required: bool
    default: Any = None

    def __str__(self) -> str:
        return self.name if self.required else f"{self.name}={self.default!r}"


def tool_arguments(method: Callable[..., Any]) -> list[Argument] | None:
    """The arguments a domain tool method takes (after ``self`` and the call); None if it takes any."""
    try:
        parameters = list(inspect.signature(method).parameters.values())[2:]
    except (TypeError, ValueError):
        return None
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return None
    return [
        Argument(_json_name(p.name), p.default is inspect.Parameter.empty,
                 None if p.default is inspect.Parameter.empty else p.default)
        for p in parameters
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    ]


def _json_name(python_name: str) -> str:
    """A tool method's parameter as calls name it: ``from_`` takes ``from`` (see ``envs.domain``)."""
    if python_name.endswith("_") and keyword.iskeyword(python_name[:-1]):
        return python_name[:-1]
    return python_name
