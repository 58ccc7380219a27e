"""Running scenarios: load, replay, analyse (graph, findings, expectations) — one scenario's bad input or
one trajectory's crash becomes an error line, and the rest of the batch goes on."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

from litmus_replay.envs.runtime import Runtime

from .analysis import Analysis, replay_analysed
from .errors import InputError
from .scenario import find_scenarios, load_scenario

__all__ = ["Batch", "iter_scenario_runs"]


@dataclass
class Batch:
    """The analyses of every scenario trajectory replayed so far, and the error lines of those that were not."""

    runs: list[Analysis] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def checked(self) -> list[Analysis]:
        return [run for run in self.runs if run.problems is not None]

    @property
    def failed(self) -> list[Analysis]:
        return [run for run in self.checked if run.problems]


def iter_scenario_runs(paths: Iterable[str | Path], real_runtime: Runtime, batch: Batch) -> Iterator[Analysis]:
    """Replay and analyse every scenario under ``paths``; errors are appended to ``batch.errors`` as
    one-line messages."""
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
            world = scenario.task_world
            for trajectory in scenario.trajectories:
                try:
                    run = replay_analysed(world, trajectory, real_runtime, scenario=scenario)
                except Exception as exc:  # one trajectory's crash never stops the batch
                    batch.errors.append(
                        f"{file}: trajectory {trajectory.id!r}: could not be replayed: {type(exc).__name__}: {exc}"
                    )
                    continue
                # a call a world could not answer (a domain's bug, a lost server) is said once, in one line;
                # the call is unscoreable and the rest of the trajectory has replayed
                batch.errors.extend(
                    f"{file}: trajectory {trajectory.id!r}: {call.key} {call.call.tool}: {call.harness_error}"
                    for call in run.replay.calls
                    if call.harness_error
                )
                batch.runs.append(run)
                yield run
