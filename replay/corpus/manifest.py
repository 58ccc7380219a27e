"""The planted ground truth of a corpus (``manifest.json``), against which a batch re-validation is checked.

Runs are keyed by the trajectory id their format's adapter gives them (an inspect sample ``run-0007``
reads back as ``run-0007_epoch_1``), so a re-validation report can be compared key for key.

:class:`CorpusManifest` holds every run (to read a manifest, or build a small one); the generator writes
through :class:`ManifestWriter`, which keeps only the counts and the flagged ids in memory and spools the
runs' entries to a temporary file, so writing a corpus of any size holds about as much as a small one.
Both write the same bytes.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

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


@dataclass(frozen=True)
class CorpusSummary:
    """What a written corpus's manifest says at its head: its parameters, counts and flagged run ids."""

    n: int
    seed: int
    format: str
    counts: dict[str, Any]
    over_penalised: list[str]
    under_penalised: list[str]


class ManifestWriter:
    """``manifest.json`` written run by run: counts and flagged ids in memory, runs spooled to a temporary file.

    The file is byte for byte what :meth:`CorpusManifest.write` gives for the same runs in the same
    order. Use as a context manager (the spool is an unnamed file, gone when closed).
    """

    def __init__(self, n: int, seed: int, format: str, spool_dir: str | Path | None = None):
        self._head = CorpusManifest(n=n, seed=seed, format=format)
        self._spool: IO[str] = tempfile.TemporaryFile("w+", encoding="utf-8", dir=spool_dir)
        self._over: list[str] = []
        self._under: list[str] = []
        self._calls = 0
        self._by: dict[str, Counter[str]] = {"by_category": Counter(), "by_class": Counter(), "by_task": Counter()}
        self._seen = 0

    def __enter__(self) -> "ManifestWriter":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._spool.close()

    def add(self, run_id: str, run: PlantedRun) -> None:
        """One run, in corpus order."""
        if run.expected_finding == OVER:
            self._over.append(run_id)
        elif run.expected_finding == UNDER:
            self._under.append(run_id)
        self._calls += run.calls
        self._by["by_category"][run.category] += 1
        self._by["by_class"][run.expected_class] += 1
        self._by["by_task"][run.task] += 1
        # One entry of the "runs" object, as json.dumps(..., indent=1) lays it out two levels deep.
        entry = json.dumps(asdict(run), indent=1, ensure_ascii=False).replace("\n", "\n  ")
        self._spool.write(("{\n  " if not self._seen else ",\n  ") + json.dumps(run_id, ensure_ascii=False) + ": " + entry)
        self._seen += 1

    def summary(self) -> CorpusSummary:
        counts = {OVER: len(self._over), UNDER: len(self._under), "calls": self._calls,
                  **{name: dict(sorted(counter.items())) for name, counter in self._by.items()}}
        head = self._head
        return CorpusSummary(head.n, head.seed, head.format, counts, list(self._over), list(self._under))

    def write(self, path: Path) -> CorpusSummary:
        """Write the manifest to ``path`` (the head, then the spooled runs) and return its summary."""
        summary = self.summary()
        head = self._head.to_dict()
        head.update(counts=summary.counts, **{OVER: summary.over_penalised, UNDER: summary.under_penalised})
        marker = "\0runs\0"
        head["runs"] = marker
        before, after = json.dumps(head, indent=1, ensure_ascii=False).split(json.dumps(marker))
        with path.open("w", encoding="utf-8") as out:
            out.write(before)
            self._spool.seek(0)
            shutil.copyfileobj(self._spool, out)
            out.write("\n }" if self._seen else "{}")
            out.write(after + "\n")
        return summary
