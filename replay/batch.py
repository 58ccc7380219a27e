"""Re-validating historical runs in bulk: every run replayed against its task's world, one JSON line per
run appended to ``results.jsonl`` as it finishes, resumable after any interruption.

Resuming: lines already written are kept (a torn last line from a killed process is cut off), their runs
are skipped, and when the batch ends the file is rewritten atomically in discovery order — so an
interrupted batch, re-run, ends with exactly the results of an uninterrupted one: no run twice, none
missing. Lines hold no timings, so results are byte-for-byte repeatable.

Executors: a local process pool (the default), or a Dask distributed cluster; each worker process opens
its own runtime once and reuses it. Either is fed from a stream: runs are read from disk as chunks are
sent, a few chunks per worker in flight, so a batch's memory does not grow with its number of runs.

Pages: by default only the runs whose verdict does not stand (over-penalised, under-penalised,
unscoreable) get an HTML page (``reports="flagged"``; ``"all"`` or ``"none"`` otherwise); any run's page
can be made later, byte for byte the same, from ``results.jsonl`` (:func:`write_run_page`). Each page
links to the index and to the flagged runs before and after it, set once the batch's order is known.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import multiprocessing.util
import os
import re
import threading
import time
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from functools import partial
from itertools import islice
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from litmus_replay.adapters import get_adapter, load_trajectories
from litmus_replay.envs.runtime import Runtime, get_runtime

from . import limits
from .analysis import Analysis, analyse
# summarise and summarise_checks are part of this module's interface too
from .batch_summary import NO_TOOL_CALLS, SUMMARY_VERSION, Summary, summarise, summarise_checks  # noqa: F401
from .batch_schema import ResultLine
from .engine import Replayer
from .errors import InputError, UnknownName
from .model import Trajectory, from_json, to_json
from .report.atomic import open_atomic, write_atomic
from .report.batch_index import FLAGGED_FINDINGS, write_batch_index
from .report.html import PageNav, trajectory_html, with_nav
from .run_index import Found, OffsetIndex, RunIndex
from .spool import Spool
from .worker_lifetime import end_with_parent
from .worlds import NoWorld, TaskWorld, WorldCatalog

RESULTS = "results.jsonl"
SUMMARY = "summary.json"
BATCH = "batch.json"
REPORT_MODES = ("all", "flagged", "none")
REPORTS_DIR = "reports"
RUN_SUFFIXES = (".json", ".jsonl", ".eval", ".yaml", ".yml")
SYNC_SECONDS = 1.0  # results.jsonl goes to disk at least this often
SUMMARY_SECONDS = 1.0  # summary.json is rewritten at most this often while the batch runs
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class Run:
    """One trajectory to re-validate, with a stable id and its place in discovery order.

    A discovered run keeps its trajectory on disk (a :class:`~.spool.Spool`) and reads it only when it is
    needed: in the worker that replays it. The batch itself holds only ids, however many runs it has.
    """

    __slots__ = ("run_id", "order", "file", "trajectory_id", "_trajectory", "_stored")

    def __init__(self, run_id: str, order: int, file: str, trajectory: Trajectory | None = None, *,
                 stored: tuple[Spool, int, int] | None = None, trajectory_id: str | None = None):
        if trajectory is None and stored is None:
            raise TypeError("a run needs its trajectory or where it is stored")
        self.run_id, self.order, self.file = run_id, order, file
        self.trajectory_id = trajectory.id if trajectory is not None else trajectory_id
        self._trajectory = trajectory
        self._stored = stored

    @property
    def trajectory(self) -> Trajectory:
        if self._trajectory is not None:
            return self._trajectory
        return from_json(self._json())  # not kept: the batch holds no trajectory

    def loaded(self) -> "Run":
        """This run with its trajectory in memory (to replay it)."""
        return self if self._trajectory is not None else Run(self.run_id, self.order, self.file, self.trajectory)

    def _json(self) -> str:
        if self._trajectory is not None:
            return to_json(self._trajectory)
        spool, offset, length = self._stored
        return spool.get(offset, length)

    def __reduce__(self) -> tuple[Any, ...]:
        # Runs travel to worker processes as JSON, which pydantic reads back several times faster than
        # it unpickles a model.
        return _run_from_json, (self.run_id, self.order, self.file, self._json())

    def __repr__(self) -> str:
        return f"Run({self.run_id!r}, order={self.order}, file={self.file!r})"


def _run_from_json(run_id: str, order: int, file: str, trajectory: str) -> Run:
    return Run(run_id, order, file, from_json(trajectory))


@dataclass(frozen=True)
class Unreadable:
    """A run file no adapter could read: it is a result line of its own (status ``input_error``), known
    by its path, with the one-line reason."""

    file: str
    reason: str

    @property
    def run_id(self) -> str:
        return self.file

    def line(self) -> dict[str, Any]:
        return {"run": self.run_id, "file": self.file, "trajectory": None, "task": None, "original": None,
                "status": "input_error", "error": self.reason}


class Discovery:
    """What discovery finds, kept on disk: the trajectories in a :class:`~.spool.Spool`, the inputs' order and
    run ids in a :class:`~.run_index.RunIndex`.

    Inputs are read one file at a time (:meth:`step`), so a batch can replay the runs found so far while it
    reads the rest (:meth:`stream`); :func:`discover` reads them all at once. Read what was found as a
    stream (:meth:`iter_runs`, :meth:`run_ids`); ``runs`` and ``unreadable`` make lists, for small batches.
    """

    def __init__(self, paths: Iterable[str | Path] = (), fmt: str = "auto", *, task: str | None = None,
                 original_kind: str | None = None,
                 on_complete: Callable[["Discovery"], None] | None = None) -> None:
        """``task``: the task key of every run whose file names none; ``original_kind``: the kind of every
        recorded verdict whose file does not say it (see :func:`read_runs`)."""
        self.spool = Spool()
        self.index = RunIndex()
        self.found_runs = 0  # runs found so far
        self.complete = False
        self._files = _run_files(paths)
        self._fmt = fmt
        self._task = task
        self._original_kind = original_kind
        self._on_complete = on_complete

    def step(self) -> bool:
        """Read the next input file; False once every file is read and the runs have their ids."""
        if self.complete:
            return False
        following = next(self._files, None)
        if following is not None:
            self._read(*following)
            return True
        # A run is known by its trajectory id where that is unique in the batch, else by where it sits
        # under the input it was found in (two pipelines both named ``local``: ``local/…@modelA/local/….json``).
        # The id then does not depend on which other files were read, so a resumed batch finds it again.
        self.index.name()
        self.complete = True
        if self._on_complete is not None:
            self._on_complete(self)
        return False

    def read_all(self) -> "Discovery":
        while self.step():
            pass
        return self

    def _read(self, item: Path, root: Path) -> None:
        """One file's runs: each trajectory to the spool, its place to the index (one file's runs in memory)."""
        index = self.index
        try:
            limits.check_file_size(item)
            trajectories = read_runs(item, self._fmt, self._task, self._original_kind)
        except (InputError, UnknownName) as exc:
            index.add_unreadable(str(item), exc.line() if isinstance(exc, InputError) else f"{item}: {exc}")
            return
        except OSError as exc:  # a file that vanished or cannot be opened between listing and reading
            index.add_unreadable(str(item), f"{item}: cannot read: {exc.strerror or exc}")
            return
        here = item.resolve()
        where = _within(item, root)
        kept = []
        for position, trajectory in enumerate(trajectories):
            # Runs an index file read from other files (tau2's results.json names simulations/*.json):
            # those files, met later, give the same runs again, which are not counted twice.
            if index.was_read_elsewhere(str(here), trajectory.id):
                continue
            source = Path(trajectory.source.path).resolve() if trajectory.source.path else here
            if source != here:
                index.read_elsewhere(str(source), trajectory.id)
            kept.append((position, trajectory))
        in_file = Counter(trajectory.id for _, trajectory in kept)
        for position, trajectory in kept:
            index.add_run(str(item), where, position, trajectory.id, *self.spool.put(to_json(trajectory)),
                          repeated_in_file=in_file[trajectory.id] > 1)
        self.found_runs += len(kept)

    def stream(self, on_unreadable: Callable[[Unreadable], None]) -> Iterator[Run]:
        """The runs in discovery order as they are found, each under the id it had when found (see
        :meth:`RunIndex.add_run`); files are read as the stream catches up with what was found, and a
        file no adapter could read goes to ``on_unreadable``."""
        seq = 0
        while True:
            page = self.index.after(seq)
            if not page:
                if self.step():
                    continue
                return
            for found in page:
                seq = found.seq
                if found.reason is not None:
                    on_unreadable(Unreadable(found.file, found.reason))
                else:
                    yield self._run(found, found.early_id)

    def _run(self, found: Found, run_id: str) -> Run:
        return Run(run_id, found.seq, found.file, stored=(self.spool, found.offset, found.length),
                   trajectory_id=found.trajectory_id)

    def _items(self) -> Iterator[Run | Unreadable]:
        for found in self.index:
            yield Unreadable(found.file, found.reason) if found.reason is not None else self._run(found, found.run_id)

    def iter_runs(self) -> Iterator[Run]:
        """The runs, in discovery order."""
        return (item for item in self._items() if isinstance(item, Run))

    def iter_unreadable(self) -> Iterator[Unreadable]:
        return (item for item in self._items() if isinstance(item, Unreadable))

    def run_ids(self) -> Iterator[str]:
        """Every input's id, unreadable files included, as found."""
        return (found.run_id for found in self.index)

    @property
    def runs(self) -> list[Run]:
        return list(self.iter_runs())

    @property
    def unreadable(self) -> list[Unreadable]:
        return list(self.iter_unreadable())

    @property
    def errors(self) -> list[str]:
        """The reason of each file that could not be read, one line each."""
        return [item.reason for item in self.iter_unreadable()]

    def close(self) -> None:
        self.spool.close()
        self.index.close()


def missing_inputs(paths: Iterable[str | Path]) -> list[str]:
    """The given paths that do not exist (checked before anything is written)."""
    return [str(path) for path in paths if not Path(path).exists()]


def _run_files(paths: Iterable[str | Path]) -> Iterator[tuple[Path, Path]]:
    """(file, the input it was found under) for every run file, each directory's files sorted."""
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            yield from ((p, path) for p in sorted(p for p in path.rglob("*") if p.is_file() and p.suffix in RUN_SUFFIXES))
        else:
            yield path, path


def discover(paths: Iterable[str | Path], fmt: str = "auto") -> Discovery:
    """Every run in the given files and directories; a file that cannot be read is an :class:`Unreadable`.

    One file's runs are in memory at a time: each trajectory goes to the spool and its place to the index
    as soon as its file is read."""
    return Discovery(paths, fmt).read_all()


def read_runs(file: Path, fmt: str, task: str | None = None, original_kind: str | None = None) -> list[Trajectory]:
    """A file's runs; with ``task``, each run whose file names no task gets that one. Some formats never
    name one (Anthropic messages, MCP, OpenTelemetry spans), so their runs find a world only this way.
    With ``original_kind``, each recorded verdict of unknown kind gets that one: the user's word for what
    their benchmark's scorer judged (``proposal_time`` makes over- and under-penalised findings possible)."""
    trajectories = load_trajectories(file, fmt)
    if task is not None:
        trajectories = [run if run.task else run.model_copy(update={"task": task}) for run in trajectories]
    if original_kind is not None:
        trajectories = [_with_kind(run, original_kind) for run in trajectories]
    return trajectories


def _with_kind(run: Trajectory, kind: str) -> Trajectory:
    verdict = run.original_verdict
    if verdict is None or verdict.kind != "unknown":
        return run
    return run.model_copy(update={"original_verdict": verdict.model_copy(update={"kind": kind})})


def _within(file: Path, root: Path) -> str:
    """Where a file sits under the input it was found in (the file's name, when it was given itself)."""
    if file == root:
        return file.name
    try:
        return file.relative_to(root).as_posix()
    except ValueError:
        return str(file)


# --- the work one worker does -------------------------------------------------------------------

_WORKER: dict[str, Any] = {}
_WORKER_LOCK = threading.Lock()  # a Dask worker may run several chunks at once, in threads


# What a user may say the recorded verdicts judged (--original-kind), where a run's file does not say it.
ORIGINAL_KINDS = ("proposal_time", "state_based")

# The batch's --benchmark-version, as this process's world providers read it (a bridge with versions,
# such as AgentDojo's, replays every run with it); set while a worker's state is open.
BENCHMARK_VERSION_VARIABLE = "LITMUS_BENCHMARK_VERSION"


def _put_environ(name: str, value: str | None) -> str | None:
    """Set (or, with None, remove) one environment variable; returns the value it had."""
    previous = os.environ.get(name)
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value
    return previous


def _worker_state(worlds_dir: str | None, runtime: str, benchmark_version: str | None = None) -> dict[str, Any]:
    """This process's worlds and runtime, opened on first use and kept for every later run; the world
    providers it opens see ``benchmark_version`` (see :data:`BENCHMARK_VERSION_VARIABLE`)."""
    key = (worlds_dir, runtime, benchmark_version)
    with _WORKER_LOCK:
        if _WORKER.get("key") != key:
            _close_worker_locked()
            previous = _put_environ(BENCHMARK_VERSION_VARIABLE, benchmark_version)
            _WORKER.update(key=key, environ=previous, worlds=WorldCatalog.load(worlds_dir), runtime=get_runtime(runtime))
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
    if "environ" in _WORKER:  # the variable as it was before this state (this process may be the batch's own)
        _put_environ(BENCHMARK_VERSION_VARIABLE, _WORKER["environ"])
    _WORKER.clear()
    if runtime is not None:
        runtime.close()


def replay_runs(runs: list[Run], worlds_dir: str | None, runtime: str, out_dir: str | None,
                reports: str = "all", benchmark_version: str | None = None) -> list[dict[str, Any]]:
    """Re-validate a chunk of runs in this process; one result line per run, never an exception.

    With ``out_dir``, the HTML pages ``reports`` asks for are written under ``out_dir/reports/``.
    """
    state = _worker_state(worlds_dir, runtime, benchmark_version)
    pages = None if out_dir is None or reports == "none" else (out_dir, reports)
    runs = [run.loaded() for run in runs]
    listed = (state["worlds"].listed(run.trajectory) for run in runs if run.trajectory.call_count())
    state["runtime"].prepare([world.world for world in listed if world is not None], "real")
    return [_replay_one(run, state["worlds"], state["runtime"], pages) for run in runs]


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
    unknown = Counter(call.tool for _, call in run.trajectory.calls() if call.tool not in world.known_tools)
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
        "unknown_tools": dict(sorted(unknown.items())),
        "report": report,
    }


def replay_in(world: TaskWorld, trajectory: Trajectory, runtime: Runtime,
              source: str | None = None) -> tuple[Analysis, TaskWorld]:
    """A run replayed and analysed in its world; where its replayed checks disagree with its recorded ones
    and the provider names other worlds the run may have been made in (``TaskWorld.others``), the first of
    them that reproduces every recorded check is the run's world instead, and the one returned."""
    def replayed(candidate: TaskWorld) -> Analysis:
        replay = Replayer(candidate.policy, real_runtime=runtime).replay(
            trajectory, candidate.world, candidate.key, candidate.bindings)
        return analyse(replay, source=source)

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


# --- results.jsonl: append as we go, resume, finish in order -------------------------------------


def _settled(line: dict[str, Any] | None, run: Run, out: Path, reports: str) -> bool:
    """Whether a result line already answers this run for good: the same run of the same file, replayed
    without a harness error, with the page this report mode asks for. Missing worlds and harness errors
    are tried again on resume."""
    return (
        line is not None
        and line["file"] == run.file
        and line.get("trajectory") == run.trajectory_id
        and line["status"] in ("ok", NO_TOOL_CALLS)
        and not line.get("harness_errors")
        and (not wants_page(reports, line.get("finding"))
             or (isinstance(line.get("report"), str) and (out / line["report"]).is_file()))
    )


class ResultsFile:
    """Appends one line per finished run; each line goes down in a single write, so a killed process
    leaves whole lines (and at worst a torn last one, cut on resume). Lines are synced to disk at most
    ``SYNC_SECONDS`` apart and when the file is closed: a machine that loses power loses at most that
    last moment's runs, which a resumed batch replays.

    What the batch keeps of each line is only where it lies (an :class:`~.run_index.OffsetIndex`, itself on
    disk; a later line of a run replaces an earlier one): however many runs there are, memory stays flat.
    With a :class:`~.batch_summary.Summary`, the file's summary is kept as lines come: a run's earlier line
    leaves it when a later one comes.
    """

    def __init__(self, path: Path, summary: Summary | None = None):
        self.path = path
        self.index = OffsetIndex()
        self.summary = summary
        self.empty = True  # no complete line in the file: nothing to resume
        _cut_torn_line(path)
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.end = os.fstat(self.fd).st_size
        self._synced = time.monotonic()
        for offset, raw in _complete_lines(path):
            line = _parse_line(raw)
            if line is not None:
                self._count(line)
                self.index.put(line["run"], offset, len(raw))
                self.empty = False

    def append(self, line: dict[str, Any]) -> None:
        data = (json.dumps(line, sort_keys=True) + "\n").encode("utf-8")
        os.write(self.fd, data)
        self._count(line)
        self.index.put(line["run"], self.end, len(data))
        self.end += len(data)
        if time.monotonic() - self._synced >= SYNC_SECONDS:
            self.sync()

    def _count(self, line: dict[str, Any]) -> None:
        if self.summary is not None:
            earlier = self.get(line["run"])
            if earlier is not None:
                self.summary.remove(earlier)
            self.summary.add(line)

    def sync(self) -> None:
        os.fsync(self.fd)
        self._synced = time.monotonic()

    def get(self, run_id: str) -> dict[str, Any] | None:
        """The latest line of a run, read back from the file."""
        where = self.index.get(run_id)
        return None if where is None else _parse_line(os.pread(self.fd, where[1], where[0]))

    def raw(self, run_id: str) -> bytes | None:
        """The latest line of a run as it lies in the file, newline included."""
        where = self.index.get(run_id)
        return None if where is None else os.pread(self.fd, where[1], where[0])

    def close(self) -> None:
        try:
            self.sync()
        finally:
            os.close(self.fd)
            self.index.close()


def _cut_torn_line(path: Path) -> None:
    """Cut a torn last line (a killed process's) off the file."""
    if not path.exists():
        return
    with path.open("r+b") as handle:
        size = handle.seek(0, os.SEEK_END)
        keep = size
        while keep > 0:
            step = min(65536, keep)
            handle.seek(keep - step)
            newline = handle.read(step).rfind(b"\n")
            if newline >= 0:
                keep = keep - step + newline + 1
                break
            keep -= step
        if keep != size:
            handle.truncate(keep)


def _complete_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes with the newline) of every line of a file, read as a stream."""
    if not path.exists():
        return
    offset = 0
    with path.open("rb") as handle:
        for raw in handle:
            yield offset, raw
            offset += len(raw)


def _parse_line(raw: bytes) -> dict[str, Any] | None:
    """A line of results.jsonl as written, or None for one that is not a whole line of its schema (a torn
    write, another version's, an edited one): its run is replayed again. Read with the standard library,
    which takes back the escapes of a lone surrogate a run recorded; checked against the model."""
    try:
        line = json.loads(raw)
        ResultLine.model_validate(line)
    except ValueError:  # pydantic's ValidationError is one
        return None
    return line


def finish_results(path: Path, results: ResultsFile, found: Iterable[Found], out: Path) -> dict[str, Any]:
    """Rewrite the results in discovery order, atomically: the same batch always ends with the same file.
    Returns the summary of the file written.

    Only this batch's runs are kept: lines of runs no longer among the inputs would skew the summary.
    The lines are copied from the file as they are, one at a time; a run replayed under the id it had
    before a later file repeated its trajectory id gets its own id now, and its page the name that goes
    with it.
    """
    summary = Summary()
    with open_atomic(path, binary=True) as handle:
        for item in found:
            raw = results.raw(item.run_id)
            if item.early_id not in (None, item.run_id):
                early = results.get(item.early_id)
                if early is not None and (early["file"], early.get("trajectory")) != (item.file, item.trajectory_id):
                    early = None  # another run's line (ids are never shared; this guards the rename all the same)
                if raw is None and early is not None:
                    raw = _renamed(early, item.run_id, out)
                elif raw is not None and early is not None and isinstance(early.get("report"), str):
                    (out / early["report"]).unlink(missing_ok=True)  # a page under the id it had, before a resume
            if raw is not None:
                handle.write(raw)
                summary.add(json.loads(raw))
    return summary.document()


def _renamed(line: dict[str, Any], run_id: str, out: Path) -> bytes:
    """A result line under another run id, its page moved to the name that goes with the new id."""
    line = {**line, "run": run_id}
    if isinstance(line.get("report"), str):
        page = report_path(run_id)
        try:
            os.replace(out / line["report"], out / page)
        except FileNotFoundError:
            pass
        line["report"] = page
    return (json.dumps(line, sort_keys=True) + "\n").encode("utf-8")


def iter_results(path: Path) -> Iterator[dict[str, Any]]:
    """The lines of a results file, in its order, read as a stream."""
    for _, raw in _complete_lines(path):
        line = _parse_line(raw)
        if line is not None:
            yield line


# --- pages: linked to their neighbours once the order is known, or made later ---------------------


def _flagged(line: dict[str, Any]) -> bool:
    return line.get("status") == "ok" and line.get("finding") in FLAGGED_FINDINGS


def _nav(previous: dict[str, Any] | None, following: dict[str, Any] | None) -> PageNav:
    def target(line: dict[str, Any] | None) -> tuple[str, str] | None:
        return None if line is None else (Path(report_path(line["run"])).name, line["run"])

    return PageNav(_UNLINKED.index, target(previous), target(following))


def page_navs(lines: Callable[[], Iterable[dict[str, Any]]]) -> Iterator[tuple[dict[str, Any], PageNav]]:
    """Each line with the navigation its page carries: the flagged runs before and after it, in order.

    ``lines`` gives the lines afresh on each call: they are read twice side by side (the second read runs
    ahead to the next flagged line), so only three lines are held, however long the batch."""
    ahead = (line for line in lines() if _flagged(line))
    previous, following = None, next(ahead, None)
    for line in lines():
        if following is not None and _flagged(line) and following["run"] == line["run"]:
            after = next(ahead, None)
            yield line, _nav(previous, after)
            previous, following = line, after
        else:
            yield line, _nav(previous, following)


def link_pages(out: Path, lines: Callable[[], Iterable[dict[str, Any]]]) -> None:
    """Set every written page's links to its neighbouring flagged runs (rewriting only pages that change)."""
    for line, nav in page_navs(lines):
        if not isinstance(line.get("report"), str):
            continue
        path = out / line["report"]
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            continue
        linked = with_nav(text, nav)
        if linked != text:
            write_atomic(path, linked)


def write_run_page(out: str | Path, run_id: str, *, worlds_dir: str | Path | None = None,
                   runtime: str | None = None) -> Path:
    """Make one run's page from the batch's ``results.jsonl``, as the batch writes it (byte for byte):
    the run is read again from its file and replayed against its task's world. Returns the page's path.

    The worlds, format and runtime default to those the batch recorded in ``batch.json``; the run is
    replayed with the benchmark version the batch was given (``benchmark_version`` there), if any.
    """
    out = Path(out)
    results = out / RESULTS
    if not results.is_file():
        raise InputError(str(results), None, "no results here: run `litmus-replay revalidate --out` first")
    recorded = _read_batch_record(out)
    found = next((item for item in page_navs(lambda: iter_results(results)) if item[0]["run"] == run_id), None)
    if found is None:
        raise InputError(str(results), "run", f"no run {run_id!r} in this batch")
    line, nav = found
    if line["status"] != "ok":
        raise InputError(str(results), "status", f"run {run_id!r} was not replayed ({line['status']}): it has no page")
    base = Path(recorded.get("base") or ".")
    if worlds_dir is None and recorded.get("worlds"):
        worlds_dir = base / recorded["worlds"]
    # the task the line was replayed under: a resumed batch may have been given another --task since
    kind = recorded.get("original_kind")
    trajectory = _recorded_trajectory(base / line["file"], line, recorded.get("format", "auto"), line.get("task"),
                                      kind if kind in ORIGINAL_KINDS else None)
    version = recorded.get("benchmark_version")
    previous = _put_environ(BENCHMARK_VERSION_VARIABLE, version if isinstance(version, str) and version else None)
    try:
        world = WorldCatalog.load(worlds_dir).find(trajectory)
    except NoWorld as exc:
        raise InputError(str(worlds_dir) if worlds_dir is not None else None, "task", str(exc)) from None
    finally:
        _put_environ(BENCHMARK_VERSION_VARIABLE, previous)
    real = get_runtime(runtime or recorded.get("runtime") or "sandbox")
    try:
        analysis, _ = replay_in(world, trajectory, real, line["file"])
    finally:
        real.close()
    path = out / report_path(run_id)
    write_atomic(path, trajectory_html(analysis, nav))
    return path


def _read_batch_record(out: Path) -> dict[str, Any]:
    try:
        record = json.loads((out / BATCH).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except ValueError as exc:
        raise InputError(str(out / BATCH), None, f"not JSON: {exc}") from None
    return record if isinstance(record, dict) else {}


def _recorded_trajectory(file: Path, line: dict[str, Any], fmt: str, task: str | None = None,
                         original_kind: str | None = None) -> Trajectory:
    """The trajectory a result line names: by its place in the file where the run id carries one, else by id."""
    trajectories = read_runs(file, fmt, task, original_kind)
    place = re.fullmatch(r".*#(\d+)(?:~\d+)?", line["run"]) if "@" in line["run"] else None
    if place is not None and int(place.group(1)) < len(trajectories):
        candidate = trajectories[int(place.group(1))]
        if candidate.id == line.get("trajectory"):
            return candidate
    matches = [trajectory for trajectory in trajectories if trajectory.id == line.get("trajectory")]
    if not matches:
        raise InputError(str(file), "id", f"no trajectory {line.get('trajectory')!r} in this file any more")
    return matches[0]


# --- executors ---------------------------------------------------------------------------------

# Chunks in flight per worker: one running, the rest queued so a worker never waits for the next. Runs
# are taken from the batch's stream only as chunks are sent, so the batch holds this many chunks of runs
# at a time, however many runs it has.
CHUNKS_PER_WORKER = 3


def _chunks(runs: Iterable[Run], size: int | Callable[[], int]) -> Iterator[list[Run]]:
    """Consecutive chunks of ``size`` runs (a number, or a function asked before each chunk), taken from
    ``runs`` one chunk at a time."""
    stream = iter(runs)
    while part := list(islice(stream, size() if callable(size) else size)):
        yield part


Work = Callable[[list[Run]], list[dict[str, Any]]]


def execute_local(runs: Iterable[Run], jobs: int, work: Work, on_line: Callable[[dict[str, Any]], None],
                  chunk: int | Callable[[], int], *, in_flight: int | None = None,
                  idle: Callable[[], bool] | None = None, warm: Callable[[], Any] | None = None) -> None:
    """Run chunks in this process (jobs=1) or in a process pool, calling ``on_line`` as each finishes; at
    most ``in_flight`` chunks (``CHUNKS_PER_WORKER`` per worker by default) are sent and unfinished.
    ``idle`` is this process's own work, done a step at a time while the workers run (it returns False
    once there is no more): discovery reading ahead of the runs sent. ``warm`` runs first in each worker
    process as it starts, while this process reads the first runs.

    A worker that dies (a crash in native code, the kernel's OOM killer) breaks the whole pool and every
    chunk still in it. Those runs are not charged with it: they are run again one per task, at most
    ``jobs`` at a time, and any run lost again is run alone, so only a run that kills its worker by
    itself is a harness error. The runs not yet sent go on in a fresh pool.
    """
    if jobs <= 1:
        for part in _chunks(runs, chunk):
            for line in work(part):
                on_line(line)
        return
    lost: list[Run] = []
    _in_pools(_chunks(runs, chunk), jobs, max(1, in_flight or jobs * CHUNKS_PER_WORKER), work, _each(on_line),
              lambda part, exc: lost.extend(part),  # BrokenProcessPool, an unpicklable result: retried, run by run
              idle, warm)
    if lost:
        _run_apart(sorted(lost, key=lambda run: run.order), jobs, work, on_line)


def _run_apart(runs: list[Run], width: int, work: Work, on_line: Callable[[dict[str, Any]], None]) -> None:
    """Each run as its own task, at most ``width`` in flight, a fresh pool after any breaks; with
    ``width`` 1 a run that fails is the one to blame, and is a harness error."""
    suspects: list[Run] = []

    def failed(part: list[Run], exc: BaseException) -> None:
        if width == 1:
            on_line(_worker_failed(part[0], exc))
        else:
            suspects.extend(part)

    _in_pools(([run] for run in runs), width, width, work, _each(on_line), failed)
    if suspects:
        _run_apart(suspects, 1, work, on_line)


def _each(on_line: Callable[[dict[str, Any]], None]) -> Callable[[list[Run], list[dict[str, Any]]], None]:
    """A finished part's lines, one by one, to ``on_line``."""

    def done(part: list[Run], lines: list[dict[str, Any]]) -> None:
        for line in lines:
            on_line(line)

    return done


def _in_pools(parts: Iterator[list[Run]], width: int, limit: int, work: Work,
              done: Callable[[list[Run], list[dict[str, Any]]], Any],
              failed: Callable[[list[Run], BaseException], Any], idle: Callable[[], bool] | None = None,
              warm: Callable[[], Any] | None = None) -> None:
    """Send ``parts`` to a process pool of ``width`` workers (each running ``warm`` as it starts) as
    earlier ones finish, at most ``limit`` unfinished; each part's lines go to ``done``, or its exception
    to ``failed``. A pool that breaks takes the parts it held with it (to ``failed``); the parts not yet
    sent go on in a fresh pool."""
    waiting: list[Run] | None = None  # a part a broken pool refused, for the next pool
    more = True
    while more:
        with ProcessPoolExecutor(max_workers=width, initializer=warm) as pool:
            inflight: dict[Any, list[Run]] = {}
            broken = False
            while True:
                while not broken and len(inflight) < limit:
                    part = waiting if waiting is not None else next(parts, None)
                    waiting = None
                    if part is None:
                        more = False
                        break
                    try:
                        inflight[pool.submit(work, part)] = part
                    except BrokenProcessPool:
                        waiting, broken = part, True
                if not inflight:
                    break
                if idle is not None:  # this process's own work, while nothing has finished
                    finished, _ = wait(inflight, timeout=0, return_when=FIRST_COMPLETED)
                    if not finished:
                        if not idle():
                            idle = None
                        continue
                finished, _ = wait(inflight, return_when=FIRST_COMPLETED)
                for future in finished:
                    part = inflight.pop(future)
                    try:
                        lines = future.result()
                    except Exception as exc:
                        broken = broken or isinstance(exc, BrokenProcessPool)
                        failed(part, exc)
                        continue
                    done(part, lines)


def _worker_failed(run: Run, exc: BaseException) -> dict[str, Any]:
    reason = str(exc) or "the worker process ended abruptly"
    return {**_base_line(run), "status": "harness_error",
            "error": f"the worker process failed replaying this run alone: {type(exc).__name__}: {reason}"}


def execute_dask(runs: Iterable[Run], scheduler: str, work: Work, on_line: Callable[[dict[str, Any]], None],
                 chunk: int | Callable[[], int], *, in_flight: int | None = None,
                 warm: Callable[[], Any] | None = None) -> None:
    """Run chunks on a Dask distributed cluster; each worker keeps its own runtime between chunks.

    Chunks are sent as others finish, at most ``in_flight`` at a time (``CHUNKS_PER_WORKER`` per worker
    thread the cluster has by default), so neither this process nor the scheduler holds the whole batch.
    ``warm`` is sent first to every worker, so each opens what it needs while this process reads the
    first runs. The runs of a chunk that failed are run again one per task; only a run that fails alone
    is a harness error.
    """
    from dask.distributed import Client  # optional dependency: the `dask` extra

    with Client(scheduler) as client:
        warming = [client.submit(warm, workers=[address], allow_other_workers=False, pure=False)
                   for address in client.nthreads()] if warm is not None else []
        limit = max(1, in_flight or CHUNKS_PER_WORKER * max(1, sum(client.nthreads().values())))
        lost: list[Run] = []
        _on_cluster(client, _chunks(runs, chunk), limit, work, _each(on_line), lambda part, exc: lost.extend(part))
        _on_cluster(client, ([run] for run in lost), limit, work, _each(on_line),
                    lambda part, exc: on_line(_worker_failed(part[0], exc)))
        del warming  # kept until here: a future let go of is cancelled


def _on_cluster(client: Any, parts: Iterator[list[Run]], limit: int, work: Work,
                done: Callable[[list[Run], list[dict[str, Any]]], Any],
                failed: Callable[[list[Run], BaseException], Any]) -> None:
    """Send ``parts`` to a Dask cluster as earlier ones finish, at most ``limit`` unfinished; each part's
    lines go to ``done``, or its exception to ``failed``."""
    from dask.distributed import as_completed

    part_of: dict[str, list[Run]] = {}

    def send(part: list[Run]) -> Any:
        future = client.submit(work, part, pure=False)
        part_of[future.key] = part
        return future

    pending = as_completed([send(part) for part in islice(parts, limit)])
    for future in pending:
        part = part_of.pop(future.key)
        try:
            lines = future.result()
        except Exception as exc:  # a worker lost, an unpicklable result
            failed(part, exc)
        else:
            done(part, lines)
        following = next(parts, None)
        if following is not None:
            pending.add(send(following))


# --- the whole batch ----------------------------------------------------------------------------


@dataclass
class Progress:
    """Callbacks a front end can hang a progress bar on: ``start`` when a resumed batch knows what is done,
    ``total`` when a new one has found every input (it replays runs while it finds more), ``advance`` as
    each line is written."""

    start: Callable[[int, int], None] = lambda total, done: None
    advance: Callable[[dict[str, Any]], None] = lambda line: None
    total: Callable[[int], None] = lambda total: None
    notice: Callable[[str], None] = lambda text: None  # the runtime isolates less here than it can: why
    begin: Callable[[], None] = lambda: None  # past every check: the batch has written to its output


def run_batch(
    paths: Iterable[str | Path],
    worlds_dir: str | Path | None,
    out: str | Path,
    *,
    fmt: str = "auto",
    runtime: str = "sandbox",
    jobs: int = 1,
    executor: str = "local",
    scheduler: str | None = None,
    reports: str | bool = "flagged",
    progress: Progress | None = None,
    task: str | None = None,
    benchmark_version: str | None = None,
    original_kind: str | None = None,
) -> dict[str, Any]:
    """Re-validate every run under ``paths``; results, summary and index go to ``out``. Returns the summary.

    ``task`` is the task key of the runs whose files name none (their worlds are found by it).
    ``original_kind`` (``proposal_time`` or ``state_based``) is what the recorded verdicts judged, for the
    runs whose files do not say it.

    ``benchmark_version`` is the version every run of a benchmark with versions (AgentDojo) is replayed
    with, whatever the run records; None leaves each run's own. The caller checks it names a version the
    benchmark has (the command line does); a run its version lacks a task of is ``missing_world``.

    ``reports`` says which runs get a page: ``"flagged"`` (the verdicts that do not stand), ``"all"`` or
    ``"none"`` (True and False mean all and none).

    Bad worlds and paths that do not exist raise before anything is written; a run file that cannot be
    read is a line of its own (status ``input_error``) and the rest goes on.
    """
    out = Path(out)
    paths = list(paths)
    progress = progress or Progress()
    if isinstance(reports, bool):
        reports = "all" if reports else "none"
    if reports not in REPORT_MODES:
        raise InputError(None, "--reports", f"unknown mode {reports!r}: use one of {', '.join(REPORT_MODES)}")
    missing = missing_inputs(paths)
    if missing:
        raise InputError(missing[0], None, "no such file or directory")
    if executor == "dask" and not scheduler:
        raise InputError(None, "--scheduler", "--executor dask needs the address of a Dask scheduler")
    if fmt != "auto":
        get_adapter(fmt)  # an unknown format fails here, before anything is written
    task = task.strip() if task is not None else None
    if task == "":
        raise InputError(None, "--task", "an empty task key: give the key a world in --worlds is named by")
    if original_kind is not None and original_kind not in ORIGINAL_KINDS:
        raise InputError(None, "--original-kind", f"unknown kind {original_kind!r}: use one of {', '.join(ORIGINAL_KINDS)}")
    WorldCatalog.load(worlds_dir)  # fail fast, in this process, on a bad worlds directory
    checked = _RuntimeCheck(runtime)
    found = Discovery(paths, fmt, task=task, original_kind=original_kind, on_complete=lambda done: progress.total(done.index.count()))
    while not checked.done() and found.step():  # discovery goes on while the runtime is opened
        pass
    try:
        notice = checked.result()  # a runtime that cannot run here fails the batch before anything is written
    except BaseException:
        found.close()
        raise
    if notice:
        progress.notice(notice)
    try:
        out.mkdir(parents=True, exist_ok=True)
        results_path = out / RESULTS
        writer = ResultsFile(results_path, Summary())
        write_atomic(out / BATCH, json.dumps(_batch_record(worlds_dir, fmt, runtime, benchmark_version, original_kind),
                                                  indent=2) + "\n")
    except OSError as exc:
        found.close()
        raise InputError(str(out), None, f"cannot write results there: {exc.strerror or exc}") from None
    progress.begin()
    summary_due = 0.0  # when summary.json is next written, as the lines come

    def on_line(line: dict[str, Any]) -> None:
        nonlocal summary_due
        writer.append(line)
        progress.advance(line)
        if time.monotonic() >= summary_due:
            write_atomic(out / SUMMARY, json.dumps(writer.summary.document(), indent=2) + "\n")
            summary_due = time.monotonic() + SUMMARY_SECONDS

    taken = 0  # runs the executor has taken

    def counted(runs: Iterator[Run]) -> Iterator[Run]:
        nonlocal taken
        for run in runs:
            taken += 1
            yield run

    remaining = None  # runs still to replay, where known before they are found
    if writer.empty:
        # A new batch replays runs as they are found: each under the id it has so far, which only a later
        # file repeating its trajectory id changes (set right when the results are finished).
        todo = counted(found.stream(lambda unreadable: on_line(unreadable.line())))
    else:  # resuming: the runs' ids first, to know which are done
        found.read_all()
        remaining = sum(1 for run in found.iter_runs() if not _settled(writer.get(run.run_id), run, out, reports))
        todo = counted(run for run in found.iter_runs() if not _settled(writer.get(run.run_id), run, out, reports))
        progress.start(found.index.count(), found.found_runs - remaining)
        for unreadable in found.iter_unreadable():
            on_line(unreadable.line())

    def chunk() -> int:
        """Up to 25 runs, fewer while few are known to be waiting: the workers start at once, and share the
        last runs evenly."""
        waiting = (found.found_runs if remaining is None else remaining) - taken
        return max(1, min(25, waiting // max(1, jobs * 4)))

    # Absolute paths: a Dask worker was started in a directory of its own.
    worlds = str(Path(worlds_dir).resolve()) if worlds_dir is not None else None
    work = partial(replay_runs, worlds_dir=worlds, runtime=runtime, out_dir=str(out.resolve()), reports=reports,
                   benchmark_version=benchmark_version)
    warm = partial(warm_worker, worlds, runtime, benchmark_version)
    try:
        if executor == "dask":
            execute_dask(todo, scheduler, work, on_line, chunk, warm=warm)
        else:
            execute_local(todo, jobs, work, on_line, chunk, idle=found.step, warm=warm)
        summary = finish_results(results_path, writer, found.index, out)
    finally:
        writer.close()
        found.close()
        if jobs <= 1 and executor != "dask":
            close_worker()
    ordered = partial(iter_results, results_path)  # the finished results, read afresh for each use
    link_pages(out, ordered)
    write_atomic(out / SUMMARY, json.dumps(summary, indent=2) + "\n")
    write_batch_index(out / "index.html", ordered(), summary)
    return summary


class _RuntimeCheck:
    """The batch's runtime opened once and closed again, in a thread, before anything is written: a runtime
    that cannot run here fails the batch at once, with its one-line reason. Opening a sandbox runtime starts
    one empty sandbox and waits for it, time this process spends discovering runs; the pool's workers,
    forked once it is done, inherit what it found out and do not start one each."""

    def __init__(self, runtime: str):
        self._notice: str | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._open, args=(runtime,), name="runtime check", daemon=True)
        self._thread.start()

    def _open(self, runtime: str) -> None:
        try:
            opened = get_runtime(runtime)
            self._notice = opened.notice
            opened.close()
        except BaseException as exc:  # raised again in the batch's thread
            self._error = exc

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self) -> str | None:
        """The runtime's notice (what it isolates less here than it can), or its error raised."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._notice


def _batch_record(worlds_dir: str | Path | None, fmt: str, runtime: str,
                  benchmark_version: str | None = None, original_kind: str | None = None) -> dict[str, Any]:
    """What a page made later needs to replay a run as this batch did; run files are relative to ``base``."""
    return {"batch": "litmus-replay.revalidate", "version": SUMMARY_VERSION, "base": os.getcwd(),
            "worlds": str(Path(worlds_dir).resolve()) if worlds_dir is not None else None, "format": fmt,
            "runtime": runtime, "benchmark_version": benchmark_version, "original_kind": original_kind}
