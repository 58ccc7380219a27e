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
            CREATE TABLE renamed (seq INTEGER PRIMARY KEY, run_id TEXT NOT NULL UNIQUE);
            CREATE TABLE elsewhere (source TEXT, trajectory TEXT, PRIMARY KEY (source, trajectory)) WITHOUT ROWID;
            """
        )
        self._db.execute("BEGIN")  # never committed: the database is gone with the batch, and no write waits

    def add_run(self, file: str, place: str, position: int, trajectory_id: str, offset: int, length: int, *,
                repeated_in_file: bool = False) -> tuple[int, str]:
        """A run found at ``position`` in ``file`` (``place``: where that file sits under its input;
        ``repeated_in_file``: the file holds its trajectory id more than once). Returns its place in
        discovery order and its id so far: the trajectory id unless the batch has met that id before (or
        the file repeats it, or another run's id is already that text), and then already the qualified id
        it keeps. Only an id given unqualified can change, when a later file repeats it. No two runs are
        ever given one id."""
        with self._lock:
            seen = repeated_in_file or self._db.execute(
                "SELECT 1 FROM found WHERE trajectory = ? LIMIT 1", (trajectory_id,)).fetchone() is not None \
                or self._taken(trajectory_id)
            early = self._unused(trajectory_id, place, file, position, repeated_in_file) if seen else trajectory_id
            cursor = self._db.execute(
                "INSERT INTO found (file, place, position, trajectory, offset, length, early) VALUES (?,?,?,?,?,?,?)",
                (file, place, position, trajectory_id, offset, length, early))
            return cursor.lastrowid, early

    def _taken(self, run_id: str) -> bool:
        """Whether a run already has this id, as found or as renamed."""
        return any(self._db.execute(query, (run_id,)).fetchone() is not None for query in (
            "SELECT 1 FROM found WHERE early = ? LIMIT 1", "SELECT 1 FROM renamed WHERE run_id = ? LIMIT 1"))

    def _unused(self, trajectory_id: str, place: str, file: str, position: int, repeated_in_file: bool) -> str:
        """The qualified id no run has yet: by the file's place under its input, else (two inputs hold
        files at the same place) by the file as given, else that with a count."""
        for where in (place, file):
            candidate = _qualified(trajectory_id, where, position, repeated_in_file)
            if not self._taken(candidate):
                return candidate
        count = 2
        while self._taken(f"{candidate}~{count}"):
            count += 1
        return f"{candidate}~{count}"

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
        """Give every run its id, which needs the whole batch: the id it was found under, except for the
        first run of a trajectory id that a later run repeats, which is qualified then as the later ones
        were (by where its file sits under its input; by the file as given where two inputs hold files at
        that place). An id once qualified never changes, and no id is ever another run's, so a run's
        result line can be found under the id it was found by and moved to the one it keeps."""
        with self._lock:
            seq = 0
            while rows := self._db.execute(
                """
                SELECT seq, trajectory, place, file, position FROM found AS first
                WHERE seq > ? AND reason IS NULL AND early = trajectory
                  AND EXISTS (SELECT 1 FROM found AS later WHERE later.trajectory = first.trajectory
                                                            AND later.seq <> first.seq)
                ORDER BY seq LIMIT ?
                """, (seq, _FETCH)).fetchall():
                for seq, trajectory, place, file, position in rows:
                    self._db.execute("INSERT INTO renamed VALUES (?, ?)",
                                     (seq, self._unused(trajectory, place, file, position, False)))
            self._db.execute(
                """
                INSERT INTO named SELECT found.seq, COALESCE(renamed.run_id, found.early)
                FROM found LEFT JOIN renamed ON renamed.seq = found.seq WHERE found.reason IS NULL
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
