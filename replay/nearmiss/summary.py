"""The summary of a generated suite: per seed, how many mutants were tried and kept; across the suite,
which pair classes the mutants reach (and flip calls to), which detectors they fire, and which operators
made them — so a gap in coverage shows before the suite is added to a benchmark."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..detectors import DETECTORS
from ..report.atomic import write_atomic
from ..scoring import PairClass
from .search import Mutant, Search
from .seed import Seed

__all__ = ["SeedResult", "summary", "write_summary"]


@dataclass
class SeedResult:
    """One seed's search: what was tried and kept, the files written, and the search itself (to ask it more)."""

    name: str
    source: str
    tried: int
    mutants: list[Mutant]
    files: list[Path] = field(default_factory=list)
    seed: Seed | None = field(default=None, repr=False)
    search: Search | None = field(default=None, repr=False)


def summary(results: list[SeedResult], out: Path | None = None) -> dict[str, Any]:
    """Coverage of the suite, every pair class and detector named (0: not reached)."""
    classes: Counter[str] = Counter()
    flipped_to: Counter[str] = Counter()
    detectors: Counter[str] = Counter()
    operators: Counter[str] = Counter()
    for result in results:
        for mutant in result.mutants:
            classes.update({cls for _, _, cls, _ in mutant.verdict.calls})
            flipped_to.update({f.after for f in mutant.flips if f.scope not in DETECTORS})
            detectors.update(kind for kind, count in mutant.verdict.findings if count)
            operators.update({e.operator for e in mutant.edits})
    return {
        "seeds": [
            {"name": r.name, "source": r.source, "tried": r.tried, "kept": len(r.mutants),
             "boundary": sum(m.on_boundary for m in r.mutants),
             "files": [str(p.relative_to(out)) if out else str(p) for p in r.files]}
            for r in results
        ],
        "mutants": sum(len(r.mutants) for r in results),
        "classes": {cls.value: classes[cls.value] for cls in PairClass},
        "flipped_to": {cls.value: flipped_to[cls.value] for cls in PairClass},
        "detectors": {kind: detectors[kind] for kind in DETECTORS},
        "operators": dict(sorted(operators.items())),
    }


def write_summary(document: dict[str, Any], out: Path) -> Path:
    path = out / "summary.json"
    write_atomic(path, json.dumps(document, indent=2, sort_keys=False) + "\n")
    return path


def summary_lines(document: dict[str, Any]) -> list[str]:
    seeds = document["seeds"]
    lines = [f"{len(seeds)} seed{'s' if len(seeds) != 1 else ''}, {document['mutants']} mutants kept "
             f"of {sum(s['tried'] for s in seeds)} tried"]
    for title, key in (("pair classes (mutants reaching)", "classes"), ("flipped to", "flipped_to"),
                       ("detectors (mutants firing)", "detectors"), ("operators", "operators")):
        lines.append(f"  {title}: " + ", ".join(f"{name} {count}" for name, count in document[key].items()))
    missing = [name for key in ("classes", "detectors") for name, count in document[key].items() if not count]
    if missing:
        lines.append(f"  not covered: {', '.join(missing)}")
    return lines
