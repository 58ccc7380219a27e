"""Kept mutants as scenario files: the mutated world and trajectory, the seed's policy and bindings, the
classes and findings the replay gave as ``expect:`` (every detector named, 0 included, so a finding that
appears or vanishes fails ``litmus-replay check``), and a one-line note of what changed and why it matters.

Files are written in a stable order with stable names, so the same seed gives byte-identical files.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from ..report.atomic import write_atomic
from .search import Mutant
from .seed import Seed
from .verdict import describe

__all__ = ["mutant_document", "note", "write_mutants"]

_WHY = {
    "commit_only_misuse": "the harness would score it safe while the environment commits the misuse",
    "proposal_only_misuse": "the harness would flag misuse the environment refused or never committed",
    "unscoreable": "proposal and commit contexts diverge, so no single verdict is valid",
    "confirmed_misuse": "both moments now agree it is misuse",
    "confirmed_safe": "both moments now agree it is safe",
}
_ORDER = list(_WHY)


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "mutant"


def why(mutant: Mutant) -> str:
    changes = mutant.one_more_flips if mutant.on_boundary else mutant.flips
    classes = [f.after for f in changes if f.after in _WHY]
    if classes:
        return _WHY[min(classes, key=_ORDER.index)]
    fired = [f.scope for f in changes if f.before.isdigit() and int(f.after) > int(f.before)]
    if fired:
        return f"{fired[0]} now fires"
    return "a detector stops firing" if changes else "nothing changes"


def note(seed: Seed, mutant: Mutant) -> str:
    """One line: what changed from the seed, what that flips, and why it matters."""
    changed = "; ".join(e.note for e in mutant.edits)
    if mutant.on_boundary:
        assert mutant.one_more is not None
        return (f"Near miss of {seed.name} on the boundary: {changed}. Its classes hold, but one more change "
                f"({mutant.one_more.note}) flips {describe(mutant.one_more_flips)}: {why(mutant)}.")
    return f"Near miss of {seed.name}: {changed}. Flips {describe(mutant.flips)}: {why(mutant)}."


def mutant_document(seed: Seed, mutant: Mutant, name: str) -> dict[str, Any]:
    verdict = mutant.verdict
    calls: dict[str, Any] = {}
    for key, _, cls, reason in verdict.calls:
        calls[key] = {"class": cls, "reason": reason} if reason else cls
    document: dict[str, Any] = {
        "format_version": 1,
        "name": name,
        "description": note(seed, mutant),
        "world": mutant.draft.world,
        "policy": seed.policy_spec.model_dump(mode="json", exclude_defaults=True) or {"rules": []},
    }
    if seed.bindings_doc:
        document["bindings"] = seed.bindings_doc
    trajectory = mutant.draft.trajectory_document()
    trajectory["id"] = name
    document["trajectory"] = trajectory
    document["expect"] = {"trajectory": verdict.trajectory, "calls": calls, "findings": dict(verdict.findings)}
    return document


def write_mutants(seed: Seed, mutants: list[Mutant], out: Path) -> list[Path]:
    """One file per mutant under ``out/<seed name>/``: ``NN-<operator>-<variant>.yaml``."""
    directory = out / slug(seed.name)
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for index, mutant in enumerate(mutants, start=1):
        label = "-".join(dict.fromkeys(f"{e.operator}-{e.variant}" for e in mutant.edits))
        stem = f"{index:02d}-{slug(label)}"[:90]
        document = mutant_document(seed, mutant, f"{slug(seed.name)}-nm{index:02d}")
        path = directory / f"{stem}.yaml"
        write_atomic(path, yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=100))
        written.append(path)
    return written
