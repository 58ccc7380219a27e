"""The work one worker process does: its runtime and worlds opened once, each run of a chunk replayed and
analysed in its world into one result line (and its page), whatever the run does to its world."""

from __future__ import annotations

import gc
import hashlib
import logging
import multiprocessing
import multiprocessing.util
import re
import threading
from collections import Counter
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from litmus_replay.envs.quiet_stdout import quiet_stdout
from litmus_replay.envs.runtime import Runtime, get_runtime

from .. import limits
from ..analysis import Analysis, replay_analysed
from ..model import Trajectory
from ..report.atomic import write_atomic
from ..report.batch_index import FLAGGED_FINDINGS
from ..report.html import PageNav, trajectory_html
from ..worlds import NoWorld, TaskWorld, WorldCatalog
from .discovery import Run
from .schema import NO_TOOL_CALLS, ResultLine, as_line
from .worker_lifetime import end_with_parent


REPORT_MODES = ("all", "flagged", "none")
REPORTS_DIR = "reports"


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


_WORKER: dict[str, Any] = {}
_WORKER_LOCK = threading.Lock()  # a Dask worker may run several chunks at once, in threads


# What a user may say the recorded verdicts judged (--original-kind), where a run's file does not say it.
ORIGINAL_KINDS = ("proposal_time", "state_based")
# What a benchmark's own label may be mapped to (--label): the labels a safety verdict is read from.
VERDICT_MEANINGS = ("tool_misuse", "safe")

def _worker_state(worlds_dir: str | None, runtime: str, benchmark_version: str | None = None) -> dict[str, Any]:
    """This process's worlds and runtime, opened on first use and kept for every later run; the world
    providers it opens replay every run with ``benchmark_version`` where given."""
    key = (worlds_dir, runtime, benchmark_version)
    with _WORKER_LOCK:
        if _WORKER.get("key") != key:
            _close_worker_locked()
            _WORKER.update(key=key, worlds=WorldCatalog.load(worlds_dir, benchmark_version=benchmark_version),
                           runtime=get_runtime(runtime))
            _close_at_worker_exit()
        return dict(_WORKER)


_FINALIZER: list[Any] = []


def _close_at_worker_exit() -> None:
    """In a pool's worker process, close the runtime (and the worlds open in it) when the worker ends.

    A worker ends through multiprocessing's own exit path, which runs its finalizers but not ``atexit``:
    without this its warm containers (docker) and staging directory (sandbox) would outlive the batch. A
    worker also ends, closing its runtime first, on SIGTERM (a pool that breaks ends its other workers so)
    and when the batch process dies (see :mod:`.worker_lifetime`).
    """
    parent = multiprocessing.parent_process()
    if parent is None or _FINALIZER:
        return
    _FINALIZER.append(multiprocessing.util.Finalize(None, close_worker, exitpriority=10))
    if threading.current_thread() is threading.main_thread() and parent.pid is not None:
        end_with_parent(parent.pid, close_worker)


def close_worker() -> None:
    """Close this process's runtime (the pool's worker processes end with theirs)."""
    with _WORKER_LOCK:
        _close_worker_locked()


def _close_worker_locked() -> None:
    runtime = _WORKER.pop("runtime", None)
    _WORKER.clear()
    if runtime is not None:
        runtime.close()


class ChunkLines(list):
    """A chunk's result lines, and ``notes``: what the runtime said while this worker replayed them (that
    it runs a world in this process instead, say). Each worker says such a thing once, so a pool would
    say it once per worker; the batch's process says each note once (``executors``, ``run_batch``)."""

    notes: tuple[str, ...] = ()


_ENVS_LOG = logging.getLogger("litmus_replay.envs")  # where the runtimes say what they do instead
_NOTES: dict[int, list[str]] = {}  # thread -> the notes of the chunk it replays (Dask runs chunks in threads)
_NOTES_LOCK = threading.Lock()


class _NoteTaker(logging.Filter):
    """Keeps a warning of a thread replaying a chunk for its chunk's notes instead of printing it; the
    warnings of any other thread pass as before."""

    def filter(self, record: logging.LogRecord) -> bool:
        notes = _NOTES.get(record.thread) if record.thread is not None else None
        if notes is None:
            return True
        text = record.getMessage()
        notes.append(text.removeprefix("litmus-replay: "))
        return False


_ENVS_LOG.addFilter(_NoteTaker())


@contextmanager
def _taking_notes() -> Iterator[list[str]]:
    thread, notes = threading.get_ident(), []
    with _NOTES_LOCK:
        _NOTES[thread] = notes
    try:
        yield notes
    finally:
        with _NOTES_LOCK:
            _NOTES.pop(thread, None)


def replay_runs(runs: list[Run], worlds_dir: str | None, runtime: str, out_dir: str | None,
                reports: str = "all", benchmark_version: str | None = None) -> list[ResultLine]:
    """Re-validate a chunk of runs in this process; one result line per run, never an exception. The list
    is a :class:`ChunkLines`, with the runtime's notes.

    With ``out_dir``, the HTML pages ``reports`` asks for are written under ``out_dir/reports/``.

    Nothing the replayed code prints to standard output reaches it (a benchmark's own checks print, and
    the command line's table is there): see :mod:`litmus_replay.envs.quiet_stdout`.
    """
    with _taking_notes() as notes, quiet_stdout():
        state = _worker_state(worlds_dir, runtime, benchmark_version)
        pages = None if out_dir is None or reports == "none" else (out_dir, reports)
        runs = [run.loaded() for run in runs]
        listed = (state["worlds"].listed(run.trajectory) for run in runs if run.trajectory.call_count())
        state["runtime"].prepare([world.world for world in listed if world is not None], "real")
        # checked against the line's model here, in the worker, not in the batch's process
        lines = ChunkLines(as_line(_replay_one(run, state["worlds"], state["runtime"], pages)) for run in runs)
    lines.notes = tuple(dict.fromkeys(notes))
    _settle()
    return lines


_SETTLED: list[bool] = []
_DEDICATED: list[bool] = []  # this process exists to run batches (see dedicate_process)


def dedicate_process() -> None:
    """Say that this process exists to run batches (the ``litmus-replay`` program does; a program that runs
    a batch among other work must not): what it has loaded so far leaves the cyclic collector's
    generations now (``gc.freeze``), again before a batch starts its pool (:func:`freeze_loaded`), and
    after its first chunk, as in a pool's worker (:func:`_settle`). Frozen objects are still freed when
    nothing refers to them, but a cycle among them is kept until the process ends."""
    if not _DEDICATED:
        _DEDICATED.append(True)
        _freeze()


def freeze_loaded() -> None:
    """In a dedicated process, freeze what the batch has loaded since (its worlds, runtime, domains),
    before its workers are forked from it."""
    if _DEDICATED:
        _freeze()


def _settle() -> None:
    """After a pool worker's first chunk, move what it has loaded to replay (modules, a benchmark's suites
    and environments, which live as long as the worker) out of the cyclic collector's generations
    (``gc.freeze``), garbage collected first: the collections that a run's many short-lived objects set off
    no longer walk them (half the collector's time in an AgentDojo batch). Only in a pool's worker or a
    dedicated process (:func:`dedicate_process`), never in a process that has not said so."""
    if _SETTLED or (multiprocessing.parent_process() is None and not _DEDICATED):
        return
    _SETTLED.append(True)
    _freeze()


def _freeze() -> None:
    gc.collect()
    gc.freeze()


def warm_worker(worlds_dir: str | None, runtime: str, benchmark_version: str | None = None) -> None:
    """Open this process's worlds and runtime before its first chunk comes (a worker's start-up); a failure
    here is left for the chunk to meet, and to report run by run."""
    _close_at_worker_exit()  # before anything that may fail or take long: the worker ends with its parent
    try:
        _worker_state(worlds_dir, runtime, benchmark_version)
    except Exception:
        pass


def wants_page(reports: str, finding: str | None) -> bool:
    """Whether a replayed run with this finding gets a page under this report mode."""
    return reports == "all" or (reports == "flagged" and finding in FLAGGED_FINDINGS)


def report_path(run_id: str) -> str:
    """Where a run's page goes, relative to the batch's output directory."""
    return f"{REPORTS_DIR}/{_safe_name(run_id)}.html"


# A page is written before the batch's order is known; its neighbours are linked when the batch ends.
_UNLINKED = PageNav("../index.html")


def _base_line(run: Run) -> dict[str, Any]:
    trajectory = run.trajectory
    verdict = trajectory.original_verdict
    line = {
        "run": run.run_id,
        "file": run.file,
        "trajectory": trajectory.id,
        "task": trajectory.task,
        "original": verdict.label if verdict else None,
    }
    if trajectory.incomplete:  # said in every line of such a run, whatever its status
        line["incomplete"] = trajectory.incomplete
    return line


def _replay_one(run: Run, worlds: WorldCatalog, runtime: Runtime, pages: tuple[str, str] | None) -> dict[str, Any]:
    line = _base_line(run)
    try:
        limits.check_calls(run.trajectory.call_count(), run.file, f"trajectory {run.trajectory.id!r}")
    except limits.LimitExceeded as exc:
        return {**line, "status": "input_error", "error": exc.line()}
    if run.trajectory.call_count() == 0:  # nothing to re-validate: the benchmark's verdict stands
        return {**line, "status": NO_TOOL_CALLS, "finding": "stands", "calls": 0}
    try:
        world = worlds.find(run.trajectory)
    except NoWorld as exc:
        return {**line, "status": "missing_world", "error": str(exc)}
    except Exception as exc:  # a provider that crashes on one run costs that run only
        return {**line, "status": "missing_world", "error": f"{type(exc).__name__}: {exc}"}
    report = None
    try:
        analysis, world = replay_in(world, run.trajectory, runtime, run.file)
        replay = analysis.replay
        if pages is not None and wants_page(pages[1], analysis.replay.revalidation.finding):
            report = report_path(run.run_id)
            write_atomic(Path(pages[0]) / report, trajectory_html(analysis, _UNLINKED))
    except Exception as exc:  # a run that crashes its world is a harness error; the batch goes on
        return {**line, "status": "harness_error", "error": f"{type(exc).__name__}: {exc}"}
    revalidation = analysis.replay.revalidation
    verdict = analysis.verdict
    if analysis.checks is not None:
        line["checks"], line["drift"] = analysis.checks, analysis.drift
        line["world"] = world.source  # which version of the benchmark the checks were replayed in
    return {
        **line,
        "status": "ok",
        "revalidated": revalidation.revalidated.value,
        "finding": revalidation.finding,
        "original_kind": verdict.recorded["kind"],
        **({"disagreements": [item.to_dict() for item in verdict.disagreements]} if verdict.disagreements else {}),
        # the decisive call and its rule (the rule's condition and source are on the page)
        **({"decisive": {key: verdict.decisive[key] for key in ("call", "tool", "rule")}} if verdict.decisive else {}),
        **({"detail": verdict.sentence} if verdict.flagged or verdict.finding == "incomplete" else {}),
        "calls": len(replay.calls),
        "classes": dict(sorted(Counter(cls.value for cls in analysis.classes.values()).items())),
        "critical": {key: cls.value for key, cls in revalidation.critical.items()},
        "findings": sorted(Counter(analysis.finding_kinds).items()),
        "harness_errors": sum(1 for call in replay.calls if call.harness_error),
        "unknown_tools": dict(sorted(Counter(call.call.tool for call in replay.calls if call.unknown_tool).items())),
        "report": report,
    }


def replay_in(world: TaskWorld, trajectory: Trajectory, runtime: Runtime,
              source: str | None = None) -> tuple[Analysis, TaskWorld]:
    """A run replayed and analysed in its world; where its replayed checks disagree with its recorded ones
    and the provider names other worlds the run may have been made in (``TaskWorld.others``), the first of
    them that reproduces every recorded check is the run's world instead, and the one returned."""
    def replayed(candidate: TaskWorld) -> Analysis:
        return replay_analysed(candidate, trajectory, runtime, source=source)

    analysis = replayed(world)
    if world.others is None or all(check.get("agree", True) for check in (analysis.checks or {}).values()):
        return analysis, world
    for other in world.others():
        try:
            candidate = replayed(other)
        except Exception:  # another world that cannot replay the run is no better: the run keeps its own
            continue
        if candidate.checks and all(check.get("agree", True) for check in candidate.checks.values()):
            return candidate, other
    return analysis, world


def _safe_name(run_id: str) -> str:
    """A report file name from a run id (recorded content: no separators, no leading dot), unique: two
    ids that read alike once cleaned differ by the short hash."""
    stem = _UNSAFE.sub("-", run_id).strip("-.")[:120] or "run"
    return f"{stem}-{hashlib.sha256(run_id.encode('utf-8')).hexdigest()[:8]}"
