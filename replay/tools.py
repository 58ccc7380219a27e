"""The tools a world offers: every domain tool of the domains its spec names, with the arguments each takes.

Read on the host from the registered domain classes, without building a world, so the replay can tell a
known tool from an unknown one and a binding can be checked against the tool it names.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

from litmus_replay.envs.domain import domain_class, domain_names

__all__ = ["all_tools", "world_tools"]


def world_tools(world: Mapping[str, Any]) -> dict[str, Callable[..., Any]]:
    """Tool name -> the real semantics' tool method, for the domains the world spec names."""
    names = set(domain_names())
    tools: dict[str, Callable[..., Any]] = {}
    for name in world:
        if name in names:
            tools.update(domain_class(name, "real").tools)
    return tools


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
