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

One module per job: :mod:`.discovery` (the runs of the inputs, on disk), :mod:`.worker` (what one worker
process does), :mod:`.results` (``results.jsonl``), :mod:`.pages` (run pages), :mod:`.executors` (the
process pool and Dask), :mod:`.run` (the whole batch), with :mod:`.summary` (``summary.json``),
:mod:`.schema` (the outputs' schemas), :mod:`.run_index`, :mod:`.spool` and :mod:`.worker_lifetime`
beside them. This module names what the others offer a caller.
"""

from __future__ import annotations

from .discovery import RUN_SUFFIXES, Discovery, Run, Unreadable, discover, missing_inputs, read_runs
from .executors import CHUNKS_PER_WORKER, execute_dask, execute_local
from .pages import link_pages, page_navs, write_run_page
from .results import BATCH, RESULTS, SUMMARY, ResultsFile, finish_results, iter_results
from .run import Progress, run_batch
from .schema import BatchSummary, ResultLine, as_line, read_line
from .summary import NO_TOOL_CALLS, SUMMARY_VERSION, Summary, summarise, summarise_checks
from .worker import (
    ORIGINAL_KINDS,
    REPORT_MODES,
    REPORTS_DIR,
    close_worker,
    dedicate_process,
    freeze_loaded,
    replay_in,
    replay_runs,
    report_path,
    wants_page,
    warm_worker,
)

__all__ = [
    "BATCH", "CHUNKS_PER_WORKER", "Discovery", "NO_TOOL_CALLS", "ORIGINAL_KINDS",
    "Progress", "REPORTS_DIR", "REPORT_MODES", "RESULTS", "RUN_SUFFIXES", "ResultLine", "ResultsFile", "Run",
    "SUMMARY", "SUMMARY_VERSION", "Summary", "Unreadable", "close_worker", "discover", "execute_dask",
    "execute_local", "finish_results", "iter_results", "link_pages", "missing_inputs", "page_navs",
    "dedicate_process", "freeze_loaded",
    "as_line", "BatchSummary", "read_line", "read_runs", "replay_in", "replay_runs", "report_path", "run_batch", "summarise",
    "summarise_checks", "wants_page", "warm_worker", "write_run_page",
]
