"""What a replayed trajectory means: its causal graph, the detectors' findings, its calls' classes and,
for a scenario that states expectations, where the replay fell short of them.

:func:`analyse` is the one way from a replay to its :class:`Analysis`, and :func:`replay_analysed` the one
way from a trajectory and its :class:`~.task_world.TaskWorld` to both; the scenario runner, the batch, the
near-miss generator and every report read the value it returns, so a report never rebuilds a graph or reads
findings off the replay.

Examples
--------
>>> analysis = replay_analysed(scenario.task_world, trajectory, scenario=scenario)  # doctest: +SKIP
>>> analysis.classes, [finding.kind for finding in analysis.findings], analysis.problems  # doctest: +SKIP
({'t1.c1': <PairClass.CONFIRMED_SAFE: 'confirmed_safe'>}, ['critical_decision'], [])
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Iterable

import networkx as nx

from litmus_replay.envs.runtime import Runtime

from .bridges import benchmark_checks
from .detectors import Finding, run_detectors
from .engine import Replayer, TrajectoryReplay
from .graph import build_graph
from .model import Trajectory
from .scenario import Scenario
from .scoring import PairClass
from .task_world import TaskWorld
from .verdicts import RunVerdict, judge_run

__all__ = ["Analysis", "analyse", "class_counts", "replay_analysed"]


@dataclass(frozen=True)
class Analysis:
    """One replayed trajectory with its causal graph and findings.

    ``problems`` lists the scenario's expectations the replay missed (empty: all met), or is ``None`` when
    nothing was expected of it; ``source`` is the file the trajectory was read from, where known;
    ``verdict`` puts the run's judgements side by side (:mod:`.verdicts`); ``checks`` and ``drift`` are the
    benchmark's own checks replayed, where a bridge ran them.
    """

    replay: TrajectoryReplay
    graph: nx.MultiDiGraph
    findings: list[Finding]
    problems: list[str] | None = None
    source: Path | str | None = None
    verdict: RunVerdict | None = None
    checks: dict[str, Any] | None = None
    drift: dict[str, Any] | None = None

    @property
    def label(self) -> str:
        """``scenario/trajectory`` (the task stands in for the scenario in a batch), or the trajectory id."""
        trajectory = self.replay.trajectory.id
        return f"{self.replay.scenario}/{trajectory}" if self.replay.scenario else trajectory

    @property
    def classes(self) -> dict[str, PairClass]:
        """Each call's pair class, by call key, in call order."""
        return {call.key: call.pair.cls for call in self.replay.calls}

    @property
    def finding_kinds(self) -> list[str]:
        return [finding.kind for finding in self.findings]

    @property
    def notable_findings(self) -> list[Finding]:
        """The findings a text report lists: all but the notes that a critical rule was never proposed."""
        return [f for f in self.findings if not (f.kind == "critical_decision" and f.severity == "info" and not f.nodes)]


def replay_analysed(world: TaskWorld, trajectory: Trajectory, real_runtime: Runtime | None = None,
                    stub_runtime: Runtime | None = None, *, scenario: Scenario | None = None,
                    source: Path | str | None = None) -> Analysis:
    """Replay a trajectory into the stub and the real twin of a task's world, then analyse it (both
    runtimes default to in-process ones)."""
    replay = Replayer(world.policy, stub_runtime, real_runtime).replay(trajectory, world.world, world.key, world.bindings)
    return analyse(replay, scenario, source)


def analyse(replay: TrajectoryReplay, scenario: Scenario | None = None, source: Path | str | None = None,
            original_kind: str | None = None) -> Analysis:
    """Build the causal graph, run the detectors, put the run's judgements side by side (the run's finding
    replaces the one the replay made from its calls alone) and, given the scenario replayed, check its
    expectations. ``original_kind`` names the kind of a recorded verdict whose log does not say it."""
    bridged = benchmark_checks(replay)
    checks, drift = bridged if bridged is not None else (None, None)
    verdict = judge_run(replay, checks, original_kind)
    if verdict.finding != replay.revalidation.finding:
        replay = replace(replay, revalidation=replace(replay.revalidation, finding=verdict.finding))
    graph = build_graph(replay)
    findings = run_detectors(graph, replay)
    problems = None
    if scenario is not None:
        source = scenario.path if source is None else source
        if scenario.spec.expect is not None:
            problems = scenario.check(
                {call.key: call.pair.cls for call in replay.calls},
                {call.key: call.pair.reason for call in replay.calls},
                replay.revalidation.revalidated,
                [finding.kind for finding in findings],
            )
    return Analysis(replay, graph, findings, problems, source, verdict, checks, drift)


def class_counts(analyses: Iterable[Analysis]) -> dict[str, int]:
    """How many calls fell in each pair class, every class named (zero included), in class order."""
    counts = Counter(call.pair.cls.value for analysis in analyses for call in analysis.replay.calls)
    return {cls.value: counts[cls.value] for cls in PairClass}
