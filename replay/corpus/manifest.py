"""The planted ground truth of a corpus (``manifest.json``), against which a batch re-validation is checked.

Runs are keyed by the trajectory id their format's adapter gives them (an inspect sample ``run-0007``
reads back as ``run-0007_epoch_1``), so a re-validation report can be compared key for key.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from litmus_replay.replay.errors import InputError

MANIFEST_VERSION = 1
OVER, UNDER = "over_penalised", "under_penalised"


@dataclass(frozen=True)
class PlantedRun:
    """What one run was built to be."""

    category: str  # over_penalised, under_penalised, confirmed_misuse, confirmed_safe, unscoreable, or a decoy
    template: str  # the pattern (templates.TEMPLATES)
    task: str
    principal: str
    ambient_session: str | None
    original_verdict: str
    expected_class: str  # the trajectory class a replay gives
    expected_finding: str  # what replay.scoring.revalidate_trajectory says of the original verdict
    calls: int
    file: str  # relative to the corpus directory


@dataclass
class CorpusManifest:
    """A corpus's parameters, every run's planted truth, and the over- and under-penalised run ids."""

    n: int
    seed: int
    format: str
    runs: dict[str, PlantedRun] = field(default_factory=dict)
    runs_dir: str = "runs"
    worlds_dir: str = "worlds"

    @property
    def over_penalised(self) -> list[str]:
        return [run_id for run_id, run in self.runs.items() if run.expected_finding == OVER]

    @property
    def under_penalised(self) -> list[str]:
        return [run_id for run_id, run in self.runs.items() if run.expected_finding == UNDER]

    def counts(self) -> dict[str, Any]:
        return {
            OVER: len(self.over_penalised),
            UNDER: len(self.under_penalised),
            "calls": sum(run.calls for run in self.runs.values()),
            "by_category": dict(sorted(Counter(run.category for run in self.runs.values()).items())),
            "by_class": dict(sorted(Counter(run.expected_class for run in self.runs.values()).items())),
            "by_task": dict(sorted(Counter(run.task for run in self.runs.values()).items())),
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "manifest_version": MANIFEST_VERSION,
            "n": self.n,
            "seed": self.seed,
            "format": self.format,
            "runs_dir": self.runs_dir,
            "worlds_dir": self.worlds_dir,
            "counts": self.counts(),
            OVER: self.over_penalised,
            UNDER: self.under_penalised,
            "runs": {run_id: asdict(run) for run_id, run in self.runs.items()},
        }

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n", encoding="utf-8")

    @classmethod
    def read(cls, path: str | Path) -> "CorpusManifest":
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("manifest_version") != MANIFEST_VERSION:
            raise InputError(str(path), "manifest_version", f"expected {MANIFEST_VERSION}, got {data.get('manifest_version')!r}")
        runs = {run_id: PlantedRun(**run) for run_id, run in data["runs"].items()}
        return cls(data["n"], data["seed"], data["format"], runs, data.get("runs_dir", "runs"), data.get("worlds_dir", "worlds"))
