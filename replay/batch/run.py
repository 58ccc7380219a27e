"""The whole batch: discovery, the executor and the outputs together, resumable after any interruption."""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Mapping

from litmus_replay.adapters import get_adapter
from litmus_replay.envs.runtime import get_runtime

from ..errors import InputError
from ..report.atomic import write_atomic
from ..report.batch_index import write_batch_index
from ..worlds import WorldCatalog
from .discovery import Discovery, Run, missing_inputs
from .executors import execute_dask, execute_local
from .pages import link_pages
from .results import BATCH, RESULTS, SUMMARY, SUMMARY_SECONDS, ResultsFile, _settled, finish_results, iter_results
from .schema import SUMMARY_VERSION, ResultLine
from .summary import Summary
from .worker import ORIGINAL_KINDS, REPORT_MODES, VERDICT_MEANINGS, close_worker, freeze_loaded, replay_runs, warm_worker


_LOG = logging.getLogger("litmus_replay")
CHECK_SWITCH_INTERVAL = 0.0005  # seconds: see _QuickHandoffs


@dataclass
class Progress:
    """Callbacks a front end can hang a progress bar on: ``start`` when a resumed batch knows what is done,
    ``total`` when a new one has found every input (it replays runs while it finds more), ``advance`` as
    each line is written."""

    start: Callable[[int, int], None] = lambda total, done: None
    advance: Callable[[ResultLine], None] = lambda line: None
    total: Callable[[int], None] = lambda total: None
    # the runtime isolates less here than it can, a benchmark's note: said once per batch; a program that
    # gives no hook has them as warnings of the "litmus_replay" logger
    notice: Callable[[str], None] = lambda text: _LOG.warning("%s", text)
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
    verdict_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Re-validate every run under ``paths``; results, summary and index go to ``out``. Returns the summary.

    ``task`` is the task key of the runs whose files name none (their worlds are found by it).
    ``original_kind`` (``proposal_time`` or ``state_based``) is what the recorded verdicts judged, for the
    runs whose files do not say it. ``verdict_labels`` maps a benchmark's own labels onto what they mean
    for safety (``{"fail": "tool_misuse", "pass": "safe"}``): a label no benchmark shares (``pass``, ``C``,
    a graded score) counts as neither misuse nor safe until it is mapped, so its runs are never flagged.

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
    verdict_labels = dict(verdict_labels or {})
    for label, meaning in verdict_labels.items():
        if meaning not in VERDICT_MEANINGS:
            raise InputError(None, "--label", f"{label}={meaning}: a label means one of {', '.join(VERDICT_MEANINGS)}")
    checked = _RuntimeCheck(runtime)  # first: the worlds are read while a sandbox starts
    try:
        WorldCatalog.load(worlds_dir)  # fail fast, in this process, on a bad worlds directory
    except BaseException:
        checked.wait()  # what the check opened is closed before the batch fails
        raise
    found = Discovery(paths, fmt, task=task, original_kind=original_kind, verdict_labels=verdict_labels, on_complete=lambda done: progress.total(done.index.count()))
    while not checked.done() and found.step():  # discovery goes on while the runtime is opened
        pass
    try:
        notice = checked.result()  # a runtime that cannot run here fails the batch before anything is written
    except BaseException:
        found.close()
        raise
    said: set[str] = set()

    def note(text: str) -> None:  # the runtime's notes, from every worker, each said once for the batch
        if text not in said:
            said.add(text)
            progress.notice(text)

    if notice:
        note(notice)
    try:
        out.mkdir(parents=True, exist_ok=True)
        results_path = out / RESULTS
        writer = ResultsFile(results_path, Summary())
        write_atomic(out / BATCH, json.dumps(_batch_record(worlds_dir, fmt, runtime, benchmark_version, original_kind, verdict_labels),
                                                  indent=2) + "\n")
    except OSError as exc:
        found.close()
        raise InputError(str(out), None, f"cannot write results there: {exc.strerror or exc}") from None
    progress.begin()
    summary_due = 0.0  # when summary.json is next written, as the lines come

    def on_line(line: dict[str, Any]) -> None:
        nonlocal summary_due
        progress.advance(writer.append(line))
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
    freeze_loaded()  # a dedicated process's workers are forked with what it loaded frozen
    try:
        if executor == "dask":
            execute_dask(todo, scheduler, work, on_line, chunk, warm=warm, on_note=note)
        else:
            execute_local(todo, jobs, work, on_line, chunk, idle=found.step, warm=warm, on_note=note)
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


class _QuickHandoffs:
    """A short switch interval while any batch's runtime check runs, the process's own again after the last.

    The check waits on a sandbox dozens of times (its launcher, its ids mapped, its server's hello, its
    stop) and after each wait asks for the interpreter's lock, which the batch's thread holds while it
    reads runs: at the default interval (5 ms) the asking cost more than the waiting (a check of 60 ms
    took 200, all of it before the workers start)."""

    def __init__(self, interval: float):
        self.interval = interval
        self._lock = threading.Lock()
        self._running = 0
        self._saved = 0.0

    def begin(self) -> None:
        with self._lock:
            if self._running == 0:
                self._saved = sys.getswitchinterval()
                sys.setswitchinterval(min(self._saved, self.interval))
            self._running += 1

    def end(self) -> None:
        with self._lock:
            self._running -= 1
            if self._running == 0:
                sys.setswitchinterval(self._saved)


_quick_handoffs = _QuickHandoffs(CHECK_SWITCH_INTERVAL)


class _RuntimeCheck:
    """The batch's runtime opened once and closed again, in a thread, before anything is written: a runtime
    that cannot run here fails the batch at once, with its one-line reason. Opening a sandbox runtime starts
    one empty sandbox and waits for it, time this process spends reading the worlds and discovering runs;
    the pool's workers, forked once it is done, inherit what it found out and do not start one each."""

    def __init__(self, runtime: str):
        self._notice: str | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._open, args=(runtime,), name="runtime check", daemon=True)
        _quick_handoffs.begin()
        try:
            self._thread.start()
        except BaseException:
            _quick_handoffs.end()
            raise

    def _open(self, runtime: str) -> None:
        try:
            opened = get_runtime(runtime)
            self._notice = opened.notice
            opened.close()
        except BaseException as exc:  # raised again in the batch's thread
            self._error = exc
        finally:
            _quick_handoffs.end()

    def done(self) -> bool:
        return not self._thread.is_alive()

    def wait(self) -> None:
        """Until the check is over, and what it opened closed, whatever it found."""
        self._thread.join()

    def result(self) -> str | None:
        """The runtime's notice (what it isolates less here than it can), or its error raised."""
        self.wait()
        if self._error is not None:
            raise self._error
        return self._notice


def _batch_record(worlds_dir: str | Path | None, fmt: str, runtime: str,
                  benchmark_version: str | None = None, original_kind: str | None = None,
                  verdict_labels: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What a page made later needs to replay a run as this batch did; run files are relative to ``base``."""
    return {"batch": "litmus-replay.revalidate", "version": SUMMARY_VERSION, "base": os.getcwd(),
            "worlds": str(Path(worlds_dir).resolve()) if worlds_dir is not None else None, "format": fmt,
            "runtime": runtime, "benchmark_version": benchmark_version, "original_kind": original_kind,
            **({"verdict_labels": dict(verdict_labels)} if verdict_labels else {})}
