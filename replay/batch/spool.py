"""Trajectories kept on disk between discovery and replay, so a batch holds no run it is not replaying.

Discovery reads every run file once (the run ids need the whole batch) and writes each trajectory here
as compressed JSON; a run then carries only where its trajectory lies. A worker gets the JSON, which it
reads back into a model itself. The file has no name and is gone when the batch ends, however it ends.
"""

from __future__ import annotations

import os
import tempfile
import zlib

__all__ = ["Spool"]


class Spool:
    """An append-only store of texts in an unnamed temporary file; safe to read from several threads."""

    def __init__(self, directory: str | None = None):
        self._file = tempfile.TemporaryFile(dir=directory)
        self._fd = self._file.fileno()
        self._end = 0

    def put(self, text: str) -> tuple[int, int]:
        """Store ``text``; returns (offset, length) to read it back with."""
        data = zlib.compress(text.encode("utf-8"), 1)
        offset = self._end
        written = 0
        while written < len(data):
            written += os.pwrite(self._fd, data[written:], offset + written)
        self._end += len(data)
        return offset, len(data)

    def get(self, offset: int, length: int) -> str:
        """A text stored before (``os.pread`` moves no shared file position: no lock needed)."""
        data = os.pread(self._fd, length, offset)
        return zlib.decompress(data).decode("utf-8")

    def close(self) -> None:
        self._file.close()
