"""A call space: what the fidelity lab drives into one domain — its initial worlds and the calls to try.

The built-in domains have theirs (:mod:`.domains`); a plug-in domain registers its own (:mod:`.registry`) or
hands one straight to the pytest plugin's ``stub_fidelity`` fixture.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from hypothesis import strategies as st

from litmus_replay.envs.domain import PROFILE_KEY, domain_class

__all__ = ["CallSpace", "call", "stub_profiles", "with_profile"]

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


def stub_profiles(domain: str) -> list[str]:
    """The named profiles of a domain's stub."""
    return list(domain_class(domain, "stub").profiles)
