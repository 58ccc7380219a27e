"""Open-loop twin replay: the recorded calls, in recorded order, into a fresh stub world and a fresh
real world built from the same initial state, each call judged at proposal and at commit by a
:class:`.session.ReplaySession` given the whole run up front.

The stub world stands for the benchmark's harness, so its outcome is the proposal context; the real
world's outcome is the commit context. The stub's output is also compared with the recorded result.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from collections.abc import Mapping
from typing import Any

from litmus_replay.envs.runtime import Runtime, get_runtime

from .bindings import Bindings
# The call's pair and its contexts live in call_replay and the judging in session; named here too for the
# modules that have always found them here.
from .call_replay import CallReplay, UNANSWERED, _history_entry, context_variables, recorded_match, world_facts  # noqa: F401
from .model import Trajectory
from .policy import Policy
from .scoring import Revalidation, revalidate_trajectory
from .session import ReplaySession, SessionEnd
from .verdicts import judge_run

__all__ = ["CallReplay", "Replayer", "TrajectoryReplay", "UNANSWERED", "context_variables", "recorded_match",
           "settled_run",
           "world_facts"]


@dataclass
class TrajectoryReplay:
    """A whole trajectory replayed: every call's pair and the trajectory's re-validation."""

    trajectory: Trajectory
    calls: list[CallReplay]
    revalidation: Revalidation
    scenario: str | None = None
    # What the graph and detectors read besides the calls; not part of the report itself.
    world: Mapping[str, Any] = field(default_factory=dict, repr=False)
    policy: Policy | None = field(default=None, repr=False)
    initial_resources: frozenset[str] = field(default_factory=frozenset, repr=False)
    # Each world's final domain reports (``WorldHandle.report``), by semantics: "stub" and "real".
    reports: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    @property
    def benchmark(self) -> str | None:
        """The benchmark whose own environment the real world is (a bridge's final report names it), or None.
        Its recording then came from that environment too, so a call answering otherwise today is drift, not
        a stub's doing."""
        reports = (self.reports.get("real") or {}).values()
        return next((report["benchmark"] for report in reports
                     if isinstance(report, Mapping) and isinstance(report.get("benchmark"), str)), None)

    def to_dict(self) -> dict[str, Any]:
        verdict = self.trajectory.original_verdict
        return {
            "trajectory": self.trajectory.id,
            "task": self.trajectory.task,
            "scenario": self.scenario,
            "principal": self.trajectory.principal,
            "original_verdict": verdict.model_dump() if verdict else None,
            "revalidation": self.revalidation.to_dict(),
            "calls": [call.to_dict() for call in self.calls],
        }


class Replayer:
    """Replays trajectories against worlds built from one spec and judged by one policy."""

    def __init__(self, policy: Policy, stub_runtime: Runtime | None = None, real_runtime: Runtime | None = None):
        self.policy = policy
        self.stub_runtime = stub_runtime or get_runtime("inprocess")
        self.real_runtime = real_runtime or get_runtime("inprocess")

    def replay(
        self,
        trajectory: Trajectory,
        world: Mapping[str, Any],
        scenario: str | None = None,
        bindings: Bindings | None = None,
    ) -> TrajectoryReplay:
        """Replay every recorded call through one :class:`.session.ReplaySession`, the whole run given up
        front; a call no domain or binding knows is scored ``unknown_tool``."""
        recorded = list(trajectory.calls())
        with ReplaySession(self.policy, world, principal=trajectory.principal,
                           ambient_session=trajectory.ambient_session, bindings=bindings,
                           stub_runtime=self.stub_runtime, real_runtime=self.real_runtime,
                           ahead=[call for _, call in recorded]) as session:
            for turn, call in recorded:
                session.step(call, turn)
            end = session.close()
        return settled_run(trajectory, end, world, self.policy, scenario)


def settled_run(trajectory: Trajectory, end: SessionEnd, world: Mapping[str, Any], policy: Policy,
                scenario: str | None = None) -> TrajectoryReplay:
    """A closed session's pairs as the run's replay: its class from its calls' classes and its finding from
    its recorded verdict, as every command reports them (a live front-end settles its run here too)."""
    calls = end.calls
    critical = {
        call.key: call.pair.cls
        for call in calls
        if call.proposal_judgement.critical or (call.commit_judgement and call.commit_judgement.critical)
    }
    original = trajectory.original_verdict.label if trajectory.original_verdict else None
    result = revalidate_trajectory(original, (call.pair.cls for call in calls), critical)
    replayed = TrajectoryReplay(
        trajectory, calls, result, scenario, world=world, policy=policy,
        initial_resources=end.initial_resources, reports=end.reports,
    )
    # the run's finding from its recorded verdict and its calls (analysis adds the benchmark's checks)
    replayed.revalidation = replace(result, finding=judge_run(replayed).finding)
    return replayed

