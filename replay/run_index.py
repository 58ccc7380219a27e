"""A batch's bookkeeping on disk: the runs it found, under which ids, in which order, and where each run's
result line lies.

Both live in private SQLite databases (``sqlite3.connect("")``: a temporary file with no name, gone when
the connection closes), so a batch of 100,000 runs holds no more of them in memory than one of 1,000 —
SQLite keeps a small page cache and leaves the rest on disk.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Iterator, NamedTuple

__all__ = ["Found", "OffsetIndex", "RunIndex"]

_FETCH = 512  # rows read from a cursor at a time


def _private_database() -> sqlite3.Connection:
    """A temporary on-disk database for this process alone: nothing to recover after a crash, so no journal."""
    connection = sqlite3.connect("", check_same_thread=False, isolation_level=None)
    connection.execute("PRAGMA journal_mode=OFF")
    connection.execute("PRAGMA synchronous=OFF")
    connection.execute("PRAGMA cache_size=-4096")  # KiB: a fixed ceiling, whatever the batch's size
    return connection


class Found(NamedTuple):
    """One input as discovery found it: a run (its trajectory stored at ``offset``/``length``) or a file no
    adapter could read (``reason`` set, ``run_id`` its path). ``early_id`` is the id the run was given when
    it was found, before the whole batch was read: the same as ``run_id`` unless a later file repeated its
    trajectory id."""

    seq: int
    run_id: str
    file: str
    trajectory_id: str | None
    offset: int | None
    length: int | None
    reason: str | None
    early_id: str | None = None


class RunIndex:
    """The inputs of a batch in discovery order. Runs are added as files are read, each with the id it can be
    given so far; :meth:`name` then gives each its run id, which needs the whole batch (a trajectory id
    repeated across files is qualified, so the first of them is renamed then)."""

    def __init__(self) -> None:
        self._db = _private_database()
        self._lock = threading.Lock()
        self._db.executescript(
            """
            CREATE TABLE found (seq INTEGER PRIMARY KEY, file TEXT NOT NULL, place TEXT, position INTEGER,
                                trajectory TEXT, offset INTEGER, length INTEGER, reason TEXT, early TEXT);
            CREATE INDEX found_by_trajectory ON found (trajectory);
            CREATE INDEX found_by_early ON found (early);
            CREATE TABLE named (seq INTEGER PRIMARY KEY, run_id TEXT NOT NULL);
            CREATE TABLE elsewhere (source TEXT, trajectory TEXT, PRIMARY KEY (source, trajectory)) WITHOUT ROWID;
            """
        )
        self._db.execute("BEGIN")  # never committed: the database is gone with the batch, and no write waits

    def add_run(self, file: str, place: str, position: int, trajectory_id: str, offset: int, length: int, *,
                repeated_in_file: bool = False) -> tuple[int, str]:
        """A run found at ``position`` in ``file`` (``place``: where that file sits under its input;
        ``repeated_in_file``: the file holds its trajectory id more than once). Returns its place in
        discovery order and its id so far: the trajectory id unless the batch has met that id before (or
        the file repeats it), and then already the qualified id it keeps. Only an id given unqualified can
        change, when a later file repeats it."""
        with self._lock:
            seen = repeated_in_file or self._db.execute(
                "SELECT 1 FROM found WHERE trajectory = ? LIMIT 1", (trajectory_id,)).fetchone() is not None
            early = self._unused(trajectory_id, place, file, position, repeated_in_file) if seen else trajectory_id
            cursor = self._db.execute(
                "INSERT INTO found (file, place, position, trajectory, offset, length, early) VALUES (?,?,?,?,?,?,?)",
                (file, place, position, trajectory_id, offset, length, early))
            return cursor.lastrowid, early

    def _unused(self, trajectory_id: str, place: str, file: str, position: int, repeated_in_file: bool) -> str:
        """The qualified id no run found so far has: by the file's place under its input, else (two inputs
        hold files at the same place) by the file as given, else by the run's place in discovery order."""
        taken = lambda run_id: self._db.execute("SELECT 1 FROM found WHERE early = ? LIMIT 1", (run_id,)).fetchone()
        for where in (place, file):
            candidate = _qualified(trajectory_id, where, position, repeated_in_file)
            if taken(candidate) is None:
                return candidate
        seq = self._db.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM found").fetchone()[0]
        return f"{candidate}~{seq}"

    def add_unreadable(self, file: str, reason: str) -> int:
        """A file no adapter could read; returns its place in discovery order."""
        with self._lock:
            return self._db.execute("INSERT INTO found (file, reason) VALUES (?, ?)", (file, reason)).lastrowid

    def read_elsewhere(self, source: str, trajectory_id: str) -> None:
        """Remember that an index file gave this run of ``source``: met again there, it is not counted twice."""
        with self._lock:
            self._db.execute("INSERT OR IGNORE INTO elsewhere VALUES (?, ?)", (source, trajectory_id))

    def was_read_elsewhere(self, source: str, trajectory_id: str) -> bool:
        with self._lock:
            return self._db.execute("SELECT 1 FROM elsewhere WHERE source = ? AND trajectory = ?",
                                    (source, trajectory_id)).fetchone() is not None

    def name(self) -> None:
        """Give every run its id: the trajectory id where it is unique in the batch, else qualified by where
        its file sits under its input (and by its place in the file, where the file repeats it); where two
        inputs hold files at the same place, by the file as given; and where even that repeats (a file given
        twice), by the run's place in discovery order. No two runs share an id."""
        with self._lock:
            self._db.execute(
                """
                WITH counted AS (
                    SELECT seq, trajectory, place, file, position,
                           COUNT(*) OVER (PARTITION BY trajectory) AS in_batch,
                           CASE WHEN COUNT(*) OVER (PARTITION BY file, trajectory) > 1
                                THEN '#' || position ELSE '' END AS in_file
                    FROM found WHERE reason IS NULL),
                by_place AS (
                    SELECT seq, trajectory, file, in_file,
                           CASE WHEN in_batch = 1 THEN trajectory ELSE trajectory || '@' || place || in_file END AS id
                    FROM counted),
                by_file AS (
                    SELECT seq, CASE WHEN COUNT(*) OVER (PARTITION BY id) = 1 THEN id
                                     ELSE trajectory || '@' || file || in_file END AS id
                    FROM by_place)
                INSERT INTO named
                SELECT seq, CASE WHEN COUNT(*) OVER (PARTITION BY id) = 1 THEN id ELSE id || '~' || seq END
                FROM by_file ORDER BY seq
                """
            )

    def __iter__(self) -> Iterator[Found]:
        """Every input, in discovery order, read from disk a few hundred at a time."""
        seq = 0
        while page := self.after(seq):
            yield from page
            seq = page[-1].seq

    def after(self, seq: int, limit: int = _FETCH) -> list[Found]:
        """The next ``limit`` inputs after ``seq`` in discovery order (to follow discovery as it goes)."""
        with self._lock:
            rows = self._db.execute(
                """
                SELECT found.seq, COALESCE(named.run_id, found.early, found.file), file, trajectory, offset, length,
                       reason, COALESCE(found.early, found.file)
                FROM found LEFT JOIN named ON named.seq = found.seq WHERE found.seq > ? ORDER BY found.seq LIMIT ?
                """, (seq, limit)).fetchall()
        return [Found(*row) for row in rows]

    def count(self, *, runs_only: bool = False) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM found" + (" WHERE reason IS NULL" if runs_only else "")
                                    ).fetchone()[0]

    def close(self) -> None:
        self._db.close()


def _qualified(trajectory: str, place: str, position: int, repeated_in_file: bool) -> str:
    """The id of a run whose trajectory id the batch repeats: qualified by where its file sits under its
    input, and by its place in the file where the file repeats it too."""
    return f"{trajectory}@{place}" + (f"#{position}" if repeated_in_file else "")


class OffsetIndex:
    """Where each run's latest result line lies in a results file: run id -> (offset, length)."""

    def __init__(self) -> None:
        self._db = _private_database()
        self._db.execute("CREATE TABLE lines (run_id TEXT PRIMARY KEY, offset INTEGER, length INTEGER) WITHOUT ROWID")
        self._db.execute("BEGIN")  # never committed, as above
        self._lock = threading.Lock()

    def put(self, run_id: str, offset: int, length: int) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO lines VALUES (?, ?, ?)", (run_id, offset, length))

    def get(self, run_id: str) -> tuple[int, int] | None:
        with self._lock:
            return self._db.execute("SELECT offset, length FROM lines WHERE run_id = ?", (run_id,)).fetchone()

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM lines").fetchone()[0]

    def close(self) -> None:
        self._db.close()
