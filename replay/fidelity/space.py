"""A call space: what the fidelity lab drives into one domain — its initial worlds and the calls to try.

The built-in domains have theirs (:mod:`.domains`); a plug-in domain registers its own with
:func:`register_space` or through the ``litmus_replay.fidelity`` entry-point group, or hands one straight
to the pytest plugin's ``stub_fidelity`` fixture.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, Mapping

from hypothesis import strategies as st

from litmus_replay.envs.domain import PROFILE_KEY, domain_class

from ..errors import UnknownName

__all__ = ["CallSpace", "ENTRY_POINT_GROUP", "call", "get_space", "register_space", "space_names", "stub_profiles", "with_profile"]

ENTRY_POINT_GROUP = "litmus_replay.fidelity"


@dataclass(frozen=True)
class CallSpace:
    """Initial worlds and calls for one domain.

    ``worlds`` draws a world spec (a strategy, or one fixed mapping); ``calls`` draws one request
    ``{"tool", "params", "principal"}``. ``needs_isolation`` says the real twin only runs in a sandbox or a
    container (a shell executes what it is given).
    """

    domain: str
    worlds: Any
    calls: st.SearchStrategy[dict[str, Any]]
    needs_isolation: bool = False
    description: str = ""
    tags: tuple[str, ...] = field(default=())

    def world_strategy(self, profile: str | None = None) -> st.SearchStrategy[dict[str, Any]]:
        """Worlds with the stub's profile set, when one is asked for."""
        worlds = self.worlds if isinstance(self.worlds, st.SearchStrategy) else st.just(dict(self.worlds))
        if profile is None:
            return worlds
        return worlds.map(lambda world: with_profile(world, self.domain, profile))


def with_profile(world: Mapping[str, Any], domain: str, profile: str) -> dict[str, Any]:
    """A copy of the world whose stub plays ``profile`` for ``domain``."""
    section = dict(world.get(domain) or {})
    section[PROFILE_KEY] = profile
    return {**world, domain: section}


def call(tool: str, principal: Any = "alice", **params: Any) -> st.SearchStrategy[dict[str, Any]]:
    """A request strategy: each keyword is a strategy (or a constant) for one parameter; a drawn None
    leaves the parameter out, as an agent that omits an optional argument would."""

    def build(drawn: dict[str, Any]) -> dict[str, Any]:
        who = drawn.pop("__principal__")
        return {"tool": tool, "params": {k: v for k, v in drawn.items() if v is not None}, "principal": who}

    fields = {name: value if isinstance(value, st.SearchStrategy) else st.just(value) for name, value in params.items()}
    fields["__principal__"] = principal if isinstance(principal, st.SearchStrategy) else st.just(principal)
    return st.fixed_dictionaries(fields).map(build)


_SPACES: dict[str, CallSpace] = {}
_entry_points_loaded = False


def register_space(space: CallSpace) -> CallSpace:
    """Make a call space available to ``litmus-replay fidelity`` under its domain's name."""
    _SPACES[space.domain] = space
    return space


def space_names() -> list[str]:
    _load()
    return sorted(_SPACES)


def get_space(domain: str) -> CallSpace:
    """The call space for a domain; raises :class:`UnknownName` listing the domains that have one."""
    _load()
    if domain not in _SPACES:
        raise UnknownName("fidelity domain", domain, space_names())
    return _SPACES[domain]


def stub_profiles(domain: str) -> list[str]:
    """The named profiles of a domain's stub."""
    return list(domain_class(domain, "stub").profiles)


def _load() -> None:
    global _entry_points_loaded
    if _entry_points_loaded:
        return
    _entry_points_loaded = True
    from . import domains  # noqa: F401  (registers the built-in domains' spaces)

    for entry in metadata.entry_points(group=ENTRY_POINT_GROUP):
        loaded = entry.load()
        if isinstance(loaded, CallSpace):
            register_space(loaded)
