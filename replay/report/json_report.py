"""The JSON report: a versioned document holding every trajectory's replay, causal graph and findings.

Its shape is stated by :mod:`.schema` and committed as ``replay/schemas/report-v1.schema.json``.
The document is built from :class:`~litmus_replay.replay.analysis.Analysis` values, never from side
channels on the replay.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..analysis import Analysis, class_counts
from .atomic import write_atomic
from .export import graph_document
from .schema import REPORT_VERSION

__all__ = ["REPORT_VERSION", "class_counts", "run_document", "trajectory_document", "write_json"]


def trajectory_document(run: Analysis) -> dict[str, Any]:
    """One trajectory: the replay's own fields, then its findings and graph, then its calls."""
    document = run.replay.to_dict()
    calls = document.pop("calls")
    document["verdict"] = run.verdict.to_dict() if run.verdict else None
    document["findings"] = [finding.to_dict() for finding in run.findings]
    document["graph"] = graph_document(run.graph)
    document["calls"] = calls
    return document


def run_document(
    runs: Iterable[Analysis], errors: Sequence[str] = (), checks: dict[str, list[str]] | None = None
) -> dict[str, Any]:
    """The whole run as one JSON-ready document.

    ``checks`` maps a ``scenario/trajectory`` label to its expectation problems; by default it is taken
    from the runs themselves (those whose scenario states expectations).
    """
    items = list(runs)
    if checks is None:
        checks = {run.label: run.problems for run in items if run.problems is not None}
    return {
        "report": "litmus-replay.run",
        "version": REPORT_VERSION,
        "summary": {
            "trajectories": len(items),
            "calls": sum(len(run.replay.calls) for run in items),
            "classes": class_counts(items),
            "expectations_failed": {name: problems for name, problems in checks.items() if problems},
            "input_errors": len(errors),
        },
        "results": [trajectory_document(run) for run in items],
        "errors": list(errors),
    }


def write_json(document: dict[str, Any], path: str | Path) -> None:
    """Write atomically, so an interrupted run never leaves a truncated report in place of a good one."""
    write_atomic(path, json.dumps(document, indent=2, default=str) + "\n")
