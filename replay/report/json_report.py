"""The JSON report: a versioned document holding every trajectory's replay."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterable

from ..engine import TrajectoryReplay
from ..scoring import PairClass

REPORT_VERSION = 1


def class_counts(results: Iterable[TrajectoryReplay]) -> dict[str, int]:
    counts = {cls.value: 0 for cls in PairClass}
    for result in results:
        for call in result.calls:
            counts[call.pair.cls.value] += 1
    return counts


def run_document(results: list[TrajectoryReplay], errors: list[str], checks: dict[str, list[str]]) -> dict[str, Any]:
    """The whole run as one JSON-ready document."""
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
        "results": [result.to_dict() for result in results],
        "errors": errors,
    }


def write_json(document: dict[str, Any], path: str | Path) -> None:
    """Write atomically, so an interrupted run never leaves a truncated report in place of a good one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(document, handle, indent=2, default=str)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
