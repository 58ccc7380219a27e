"""Executors: chunks of runs sent to a local process pool or a Dask cluster, a few per worker in flight, so a
batch holds only those chunks; a run that kills its worker is replayed alone and costs only itself."""

from __future__ import annotations

from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from itertools import islice
from typing import Any, Callable, Iterable, Iterator
from .discovery import Run
from .worker import _base_line




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
                  idle: Callable[[], bool] | None = None, warm: Callable[[], Any] | None = None,
                  on_note: Callable[[str], None] | None = None) -> None:
    """Run chunks in this process (jobs=1) or in a process pool, calling ``on_line`` as each finishes (and
    ``on_note`` with each of a chunk's notes, see ``worker.ChunkLines``); at
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
        done = _each(on_line, on_note)
        for part in _chunks(runs, chunk):
            done(part, work(part))
        return
    lost: list[Run] = []
    _in_pools(_chunks(runs, chunk), jobs, max(1, in_flight or jobs * CHUNKS_PER_WORKER), work, _each(on_line, on_note),
              lambda part, exc: lost.extend(part),  # BrokenProcessPool, an unpicklable result: retried, run by run
              idle, warm)
    if lost:
        _run_apart(sorted(lost, key=lambda run: run.order), jobs, work, on_line, on_note, warm)


def _run_apart(runs: list[Run], width: int, work: Work, on_line: Callable[[dict[str, Any]], None],
               on_note: Callable[[str], None] | None = None, warm: Callable[[], Any] | None = None) -> None:
    """Each run as its own task, at most ``width`` in flight, a fresh pool after any breaks; with
    ``width`` 1 a run that fails is the one to blame, and is a harness error. Its workers start as the
    first pool's do (``warm``): among other things, that is what makes each end with the batch process."""
    suspects: list[Run] = []

    def failed(part: list[Run], exc: BaseException) -> None:
        if width == 1:
            on_line(_worker_failed(part[0], exc))
        else:
            suspects.extend(part)

    _in_pools(([run] for run in runs), width, width, work, _each(on_line, on_note), failed, warm=warm)
    if suspects:
        _run_apart(suspects, 1, work, on_line, on_note, warm)


def _each(on_line: Callable[[dict[str, Any]], None],
          on_note: Callable[[str], None] | None = None) -> Callable[[list[Run], list[dict[str, Any]]], None]:
    """A finished part's notes to ``on_note``, then its lines, one by one, to ``on_line``."""

    def done(part: list[Run], lines: list[dict[str, Any]]) -> None:
        if on_note is not None:
            for note in getattr(lines, "notes", ()):
                on_note(note)
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
                 warm: Callable[[], Any] | None = None, on_note: Callable[[str], None] | None = None) -> None:
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
        _on_cluster(client, _chunks(runs, chunk), limit, work, _each(on_line, on_note), lambda part, exc: lost.extend(part))
        _on_cluster(client, ([run] for run in lost), limit, work, _each(on_line, on_note),
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
