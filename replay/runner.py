"""Running scenarios: load, replay, build the causal graph, detect, check expectations — one scenario's
bad input or one trajectory's crash becomes an error line, and the rest of the batch goes on."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import networkx as nx

from litmus_replay.envs.runtime import Runtime

from .detectors import Finding, run_detectors
from .engine import Replayer, TrajectoryReplay
from .errors import InputError
from .graph import build_graph
from .scenario import Scenario, find_scenarios, load_scenario


@dataclass
class ScenarioRun:
    """One trajectory of one scenario, replayed and analysed."""

    scenario: Scenario
    result: TrajectoryReplay
    graph: nx.MultiDiGraph
    findings: list[Finding]
    problems: list[str]

    @property
    def label(self) -> str:
        return f"{self.scenario.name}/{self.result.trajectory.id}"


@dataclass
class Batch:
    runs: list[ScenarioRun] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def checked(self) -> list[ScenarioRun]:
        return [run for run in self.runs if run.scenario.spec.expect is not None]

    @property
    def failed(self) -> list[ScenarioRun]:
        return [run for run in self.checked if run.problems]


def analyse(scenario: Scenario, result: TrajectoryReplay) -> ScenarioRun:
    """Graph, findings and expectation check for one replayed trajectory."""
    graph = build_graph(result)
    findings = run_detectors(graph, result)
    result.extra["findings"] = [finding.to_dict() for finding in findings]
    problems = scenario.check(
        {call.key: call.pair.cls for call in result.calls},
        {call.key: call.pair.reason for call in result.calls},
        result.revalidation.revalidated,
        [finding.kind for finding in findings],
    )
    return ScenarioRun(scenario, result, graph, findings, problems)


def iter_scenario_runs(paths: Iterable[str | Path], real_runtime: Runtime, batch: Batch) -> Iterator[ScenarioRun]:
    """Replay every scenario under ``paths``; errors are appended to ``batch.errors`` as one-line messages."""
    for path in paths:
        try:
            files = find_scenarios([path])
        except InputError as exc:
            batch.errors.append(exc.line())
            continue
        for file in files:
            try:
                scenario = load_scenario(file)
            except InputError as exc:
                batch.errors.append(exc.line())
                continue
            replayer = Replayer(scenario.policy, real_runtime=real_runtime)
            for trajectory in scenario.trajectories:
                try:
                    run = analyse(scenario, replayer.replay(trajectory, scenario.spec.world, scenario.name))
                except Exception as exc:  # one trajectory's crash never stops the batch
                    batch.errors.append(
                        f"{file}: trajectory {trajectory.id!r}: could not be replayed: {type(exc).__name__}: {exc}"
                    )
                    continue
                batch.runs.append(run)
                yield run
