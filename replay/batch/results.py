"""``results.jsonl``: lines appended as runs finish, read back on resume (only lines that fit their schema),
and rewritten in discovery order when the batch ends, so a resumed batch ends with an uninterrupted one's file."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping

from ..report.atomic import open_atomic
from .discovery import Run
from .run_index import Found, OffsetIndex
from .schema import NO_TOOL_CALLS, ResultLine, as_line, line_json, read_line
from .summary import Summary
from .worker import report_path, wants_page


RESULTS = "results.jsonl"
SUMMARY = "summary.json"
BATCH = "batch.json"


SYNC_SECONDS = 1.0  # results.jsonl goes to disk at least this often
SUMMARY_SECONDS = 1.0  # summary.json is rewritten at most this often while the batch runs


def _settled(line: ResultLine | None, run: Run, out: Path, reports: str) -> bool:
    """Whether a result line already answers this run for good: the same run of the same file, replayed
    without a harness error, with the page this report mode asks for. Missing worlds and harness errors
    are tried again on resume."""
    return (
        line is not None
        and line.file == run.file
        and line.trajectory == run.trajectory_id
        and line.status in ("ok", NO_TOOL_CALLS)
        and not line.harness_errors
        and (not wants_page(reports, line.finding) or (line.report is not None and (out / line.report).is_file()))
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
                self.index.put(line.run, offset, len(raw))
                self.empty = False

    def append(self, line: ResultLine | Mapping[str, Any]) -> ResultLine:
        """Write one line (a worker's dict is checked against the model first); returns it as its model."""
        line = as_line(line)
        data = (line_json(line) + "\n").encode("utf-8")
        os.write(self.fd, data)
        self._count(line)
        self.index.put(line.run, self.end, len(data))
        self.end += len(data)
        if time.monotonic() - self._synced >= SYNC_SECONDS:
            self.sync()
        return line

    def _count(self, line: ResultLine) -> None:
        if self.summary is not None:
            earlier = self.get(line.run)
            if earlier is not None:
                self.summary.remove(earlier)
            self.summary.add(line)

    def sync(self) -> None:
        os.fsync(self.fd)
        self._synced = time.monotonic()

    def get(self, run_id: str) -> ResultLine | None:
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


def _parse_line(raw: bytes) -> ResultLine | None:
    """A line of results.jsonl, or None for one that is not a whole line of its schema (a torn write,
    another version's, an edited one): its run is replayed again."""
    try:
        return read_line(raw)
    except ValueError:  # pydantic's ValidationError is one
        return None


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
                if early is not None and (early.file, early.trajectory) != (item.file, item.trajectory_id):
                    early = None  # another run's line (ids are never shared; this guards the rename all the same)
                if raw is None and early is not None:
                    raw = _renamed(early, item.run_id, out)
                elif raw is not None and early is not None and early.report is not None:
                    (out / early.report).unlink(missing_ok=True)  # a page under the id it had, before a resume
            if raw is not None:
                handle.write(raw)
                summary.add(read_line(raw))
    return summary.document()


def _renamed(line: ResultLine, run_id: str, out: Path) -> bytes:
    """A result line under another run id, its page moved to the name that goes with the new id."""
    changes: dict[str, Any] = {"run": run_id}
    if line.report is not None:
        page = report_path(run_id)
        try:
            os.replace(out / line.report, out / page)
        except FileNotFoundError:
            pass
        changes["report"] = page
    return (line_json(line.model_copy(update=changes)) + "\n").encode("utf-8")


def iter_results(path: Path) -> Iterator[ResultLine]:
    """The lines of a results file, in its order, read as a stream."""
    for _, raw in _complete_lines(path):
        line = _parse_line(raw)
        if line is not None:
            yield line
