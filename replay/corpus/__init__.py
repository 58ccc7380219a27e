"""Corpora with planted ground truth: recorded runs in a foreign format, their worlds, and what each run is.

A corpus is what a batch re-validation is checked against: ``generate_corpus(n, seed, fmt, out)``
writes ``out/runs/`` (the runs, in ``native``, ``openai-chat`` or ``inspect`` format), ``out/worlds/``
(a worlds directory serving every task the runs name, see :mod:`litmus_replay.replay.worlds`) and
``out/manifest.json`` (each run's planted category and expected class, and the over- and
under-penalised run ids). The mix follows the seed study's proportions (37 over- and 9 under-penalised
per 1,200; see :mod:`.generator`), and the same ``n``, ``seed`` and format give the same bytes.

A corpus is written as it is generated: each file's runs are planned, recorded and written, then
dropped, and the manifest's entries are spooled to disk, so writing 100,000 runs holds about as much
memory as writing 1,000.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import yaml

from litmus_replay.replay.errors import InputError

from .generator import PlannedRun, iter_corpus, plan_corpus, planted_counts, recording
from .manifest import CorpusManifest, CorpusSummary, ManifestWriter, PlantedRun
from .tasks import CorpusWorld, corpus_worlds
from .templates import TEMPLATES
from .writers import WRITERS, Placed, batches, get_writer

__all__ = [
    "FORMATS",
    "CorpusError",
    "CorpusManifest",
    "CorpusSummary",
    "PlantedRun",
    "TEMPLATES",
    "generate_corpus",
    "iter_corpus",
    "plan_corpus",
    "planted_counts",
    "write_corpus",
]

FORMATS = tuple(WRITERS)


class CorpusError(InputError):
    """A corpus cannot be generated with these arguments (the message says which and what to do)."""


def generate_corpus(n: int, seed: int, fmt: str, out: Path) -> CorpusSummary:
    """Write a corpus of ``n`` runs into ``out`` (which must be absent or empty) and return its manifest's
    head (read ``out/manifest.json`` with :meth:`CorpusManifest.read` for every run's entry).

    The corpus is built in a sibling directory and moved into place whole, so a failure never leaves a
    half-written corpus, and nothing already in ``out`` is ever overwritten.
    """
    writer = get_writer(fmt)
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise CorpusError(None, "n", f"a corpus needs at least one run, got {n!r}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise CorpusError(None, "seed", f"expected an integer seed, got {seed!r}")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CorpusError(str(out), None, "already exists and is not an empty directory; name a new directory")
    worlds = corpus_worlds()
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent))
    try:
        os.chmod(staging, 0o755)
        (staging / "runs").mkdir()
        (staging / "worlds").mkdir()
        _write_worlds(worlds, staging / "worlds")
        with ManifestWriter(n, seed, fmt, spool_dir=staging) as manifest:
            runs = recording(iter_corpus(n, seed), worlds, copy=False)
            for number, batch in enumerate(batches(runs), start=1):
                placed = writer(batch, number, staging / "runs")
                for run in batch:
                    manifest.add(placed[run.id].trajectory_id, _planted(run, placed[run.id]))
            summary = manifest.write(staging / "manifest.json")
        os.replace(staging, out)  # an empty directory is replaced, a non-empty one refuses
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return summary


def write_corpus(n: int, seed: int, fmt: str, out: str | os.PathLike[str]) -> CorpusSummary:
    """What ``litmus-replay corpus`` calls: :func:`generate_corpus`, printing nothing.

    Raises :class:`CorpusError` (an ``InputError``: one line, exit status 2) for a bad ``n``, ``seed``
    or ``out``, and :class:`~litmus_replay.replay.errors.UnknownName` for an unknown format.
    """
    return generate_corpus(n, seed, fmt, Path(out))


def _write_worlds(worlds: dict[str, CorpusWorld], directory: Path) -> None:
    for name, world in sorted(worlds.items()):
        text = yaml.safe_dump(world.to_file(), sort_keys=False, allow_unicode=True, width=120)
        (directory / f"{name}.yaml").write_text(text, encoding="utf-8")


def _planted(run: PlannedRun, where: Placed) -> PlantedRun:
    trajectory = run.trajectory
    return PlantedRun(
        category=run.category,
        template=run.template,
        task=trajectory.task or "",
        principal=trajectory.principal,
        ambient_session=trajectory.ambient_session,
        original_verdict=trajectory.original_verdict.label,  # type: ignore[union-attr]
        expected_class=run.expected_class.value,
        expected_finding=run.expected_finding,
        calls=trajectory.call_count(),
        file=where.file,
    )
