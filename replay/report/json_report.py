"""The JSON report: a versioned document holding every trajectory's replay, causal graph and findings.

Its shape is stated by :mod:`.schema` and committed as ``replay/schemas/report-v1.schema.json``.
The document is built from what a run produced — :class:`~litmus_replay.replay.runner.ScenarioRun`
objects, or ``(result, graph, findings)`` triples — never from side channels on the replay.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Sequence, Union

import networkx as nx

from ..detectors import Finding
from ..engine import TrajectoryReplay
from ..runner import ScenarioRun
from ..scoring import PairClass
from .atomic import write_atomic
from .export import graph_document
from .schema import REPORT_VERSION

__all__ = ["REPORT_VERSION", "Analysed", "RunLike", "analysed", "class_counts", "run_document", "trajectory_document",
           "write_json"]


class Analysed(NamedTuple):
    """One replayed trajectory with its graph and findings, and its expectation problems when it had any."""

    result: TrajectoryReplay
    graph: nx.MultiDiGraph
    findings: Sequence[Finding]
    problems: list[str] | None = None  # None: the scenario states no expectations
    label: str | None = None


RunLike = Union[ScenarioRun, Analysed, tuple]


def analysed(item: RunLike) -> Analysed:
    """Normalise a ScenarioRun or a ``(result, graph, findings)`` triple."""
    if isinstance(item, Analysed):
        return item
    if isinstance(item, ScenarioRun):
        checked = item.scenario.spec.expect is not None
        return Analysed(item.result, item.graph, item.findings, item.problems if checked else None, item.label)
    result, graph, findings = item
    label = f"{result.scenario}/{result.trajectory.id}" if result.scenario else result.trajectory.id
    return Analysed(result, graph, findings, None, label)


def class_counts(results: Iterable[TrajectoryReplay]) -> dict[str, int]:
    counts = {cls.value: 0 for cls in PairClass}
    for result in results:
        for call in result.calls:
            counts[call.pair.cls.value] += 1
    return counts


def trajectory_document(item: RunLike) -> dict[str, Any]:
    """One trajectory: the replay's own fields, then its findings and graph, then its calls."""
    run = analysed(item)
    document = run.result.to_dict()
    calls = document.pop("calls")
    document["findings"] = [finding.to_dict() for finding in run.findings]
    document["graph"] = graph_document(run.graph)
    document["calls"] = calls
    return document


def run_document(
    runs: Iterable[RunLike], errors: Sequence[str] = (), checks: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    """The whole run as one JSON-ready document.

    ``checks`` maps a ``scenario/trajectory`` label to its expectation problems; by default it is taken
    from the runs themselves (those whose scenario states expectations).
    """
    items = [analysed(item) for item in runs]
    if checks is None:
        checks = {run.label or run.result.trajectory.id: run.problems for run in items if run.problems is not None}
    results = [run.result for run in items]
    return {
        "report": "litmus-replay.run",
        "version": REPORT_VERSION,
        "summary": {
            "trajectories": len(results),
            "calls": sum(len(r.calls) for r in results),
            "classes": class_counts(results),
            "expectations_failed": {name: problems for name, problems in checks.items() if problems},
            "input_errors": len(errors),
        },
        "results": [trajectory_document(run) for run in items],
        "errors": list(errors),
    }


def write_json(document: dict[str, Any], path: str | Path) -> None:
    """Write atomically, so an interrupted run never leaves a truncated report in place of a good one."""
    write_atomic(path, json.dumps(document, indent=2, default=str) + "\n")
