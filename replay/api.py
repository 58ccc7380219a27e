"""The Python API: what the command line does, as functions that return the typed objects it prints from.

Re-exported from :mod:`litmus_replay`, so ``from litmus_replay import revalidate`` is all a program needs.
Bad input raises :class:`~.errors.InputError` (its :meth:`~.errors.InputError.line` is the command line's
one line); nothing here prints, installs a signal handler or changes the environment. The runtimes default
to ``inprocess`` (real semantics, no isolation) so the examples run anywhere; pass ``runtime="sandbox"``
for the isolated runtime the command line uses by default.

Replay a scenario and read each call's pair class:

>>> from litmus_replay import replay_scenario
>>> [analysis] = replay_scenario("scenarios/core/mass-delete-refused-403.yaml")
>>> {key: cls.value for key, cls in analysis.classes.items()}
{'t1.c1': 'confirmed_safe', 't2.c1': 'proposal_only_misuse'}
>>> analysis.problems  # the scenario's expectations, all met
[]

Read recorded runs in any supported format, and the world each replays against:

>>> from litmus_replay import find_world, read_trajectories
>>> runs = read_trajectories("corpus/runs/corpus-0001.eval")  # an inspect_ai log of 100 samples
>>> len(runs), runs[0].id, runs[0].task
(100, 'run-0001_epoch_1', 'profiles-portal')
>>> find_world(runs[0], "corpus/worlds").source
'corpus/worlds/profiles-portal.yaml'

Re-validate a batch of runs; the summary is the ``summary.json`` the batch writes, as its model, and the
result lines are those of ``results.jsonl``:

>>> import tempfile
>>> from litmus_replay import read_results, revalidate
>>> out = tempfile.mkdtemp()
>>> summary = revalidate("corpus/runs/corpus-0001.eval", "corpus/worlds", out)
>>> summary.runs, summary.over_penalised
(100, ['run-0014_epoch_1', 'run-0023_epoch_1', 'run-0055_epoch_1', 'run-0093_epoch_1'])
>>> line = next(line for line in read_results(out) if line.run == "run-0014_epoch_1")
>>> line.original, line.revalidated, line.finding
('tool_misuse', 'proposal_only_misuse', 'over_penalised')
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

from litmus_replay.adapters import load_trajectories
from litmus_replay.envs.runtime import Runtime, get_runtime

from .analysis import Analysis, analyse, replay_analysed
from .batch import BatchSummary, ResultLine, iter_results, run_batch
from .batch.discovery import read_runs
from .batch.results import RESULTS
from .errors import InputError, TrajectoryError, UnknownName
from .model import Trajectory
from .scenario import Scenario, find_scenarios, load_scenario
from .task_world import TaskWorld
from .worlds import NoWorld, WorldCatalog

__all__ = [
    "Analysis", "BatchSummary", "InputError", "NoWorld", "ResultLine", "Scenario", "TaskWorld", "Trajectory",
    "analyse", "find_world", "load_scenario", "read_results", "read_trajectories", "replay_run", "replay_scenario",
    "revalidate",
]


def read_trajectories(path: str | Path, format: str = "auto", *, task: str | None = None) -> list[Trajectory]:
    """Every run in a file, read by the adapter of ``format`` (``auto``: the one that recognises it). With
    ``task``, a run whose file names no task gets that task key (``revalidate --task``)."""
    try:
        return read_runs(Path(path), format, task) if task is not None else load_trajectories(path, format)
    except UnknownName as exc:
        raise TrajectoryError(str(path), "format", str(exc)) from None


def find_world(trajectory: Trajectory, worlds: str | Path | None = None, *,
               benchmark_version: str | None = None) -> TaskWorld:
    """The world a run replays against: the most specific key of its task in the ``worlds`` directory, else
    a world provider (a benchmark bridge). Raises :class:`NoWorld` saying which keys were tried."""
    return WorldCatalog.load(worlds, benchmark_version=benchmark_version).find(trajectory)


def replay_run(trajectory: Trajectory, world: TaskWorld | Scenario, runtime: str | Runtime = "inprocess") -> Analysis:
    """Replay one run into the stub and the real twin of its world and analyse it: every call's pair, the
    causal graph, the detectors' findings and the run's verdict. ``runtime`` names the real world's runtime
    (one opened here is closed here) or is one the caller keeps open across many replays."""
    scenario = world if isinstance(world, Scenario) else None
    task_world = world.task_world if isinstance(world, Scenario) else world
    with _runtime(runtime) as opened:
        return replay_analysed(task_world, trajectory, opened, scenario=scenario)


def replay_scenario(path: str | Path, runtime: str | Runtime = "inprocess") -> list[Analysis]:
    """Replay every trajectory of a scenario file (or of every scenario under a directory) and check it
    against the scenario's expectations (``Analysis.problems``: empty when all hold)."""
    analyses = []
    with _runtime(runtime) as opened:
        for file in find_scenarios([path]):
            scenario = load_scenario(file)
            analyses.extend(replay_run(trajectory, scenario, opened) for trajectory in scenario.trajectories)
    return analyses


def revalidate(runs: Iterable[str | Path] | str | Path, worlds: str | Path | None, out: str | Path, *,
               format: str = "auto", runtime: str = "inprocess", jobs: int = 1, task: str | None = None,
               benchmark_version: str | None = None, original_kind: str | None = None,
               verdict_labels: dict[str, str] | None = None, reports: str = "flagged") -> BatchSummary:
    """Re-validate every run under ``runs`` (files or directories) against its task's world, as
    ``litmus-replay revalidate`` does: ``results.jsonl``, ``summary.json``, ``index.html`` and the pages of
    flagged runs go to ``out``, and a batch already there is resumed. ``verdict_labels`` says what the
    benchmark's own labels mean (``{"fail": "tool_misuse", "pass": "safe"}``). Returns the summary."""
    paths = [runs] if isinstance(runs, (str, Path)) else list(runs)
    summary = run_batch(paths, worlds, out, fmt=format, runtime=runtime, jobs=jobs, task=task,
                        benchmark_version=benchmark_version, original_kind=original_kind,
                        verdict_labels=verdict_labels, reports=reports)
    return BatchSummary.model_validate(summary)


def read_results(out: str | Path) -> Iterator[ResultLine]:
    """The result lines of a batch's ``out`` directory, in the batch's order, read as a stream."""
    path = Path(out) / RESULTS
    if not path.is_file():
        raise InputError(str(path), None, "no results here: re-validate runs into this directory first")
    return iter_results(path)


class _runtime:
    """A runtime by name, opened and closed here; or the caller's, left open."""

    def __init__(self, runtime: str | Runtime) -> None:
        self.runtime, self.owned = (get_runtime(runtime), True) if isinstance(runtime, str) else (runtime, False)

    def __enter__(self) -> Runtime:
        return self.runtime

    def __exit__(self, *exc: object) -> None:
        if self.owned:
            self.runtime.close()
