"""Atomic file writes: an interrupted run never leaves a truncated report in place of a good one."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Iterator

__all__ = ["open_atomic", "write_atomic"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# mkstemp creates 0600 files; a report should get the mode any new file would (read once: umask is per process).
_NEW_FILE_MODE = 0o666 & ~_umask()


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``."""
    if isinstance(data, bytes):
        with open_atomic(path, binary=True) as handle:
            handle.write(data)
    else:
        with open_atomic(path) as handle:
            handle.write(data)


@contextmanager
def open_atomic(path: str | Path, *, binary: bool = False) -> Iterator[IO]:
    """A file to write in pieces (a page too large to hold whole), renamed over ``path`` only once the
    block ends without an exception."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if binary:
            with os.fdopen(fd, "wb") as handle:
                yield handle
        else:
            # A lone surrogate (a truncated log, a file name that is not UTF-8) is written as its escape,
            # \udXXX: in a JSON string that is the JSON escape itself, so the value reads back unchanged.
            with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="\n") as handle:
                yield handle
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else _NEW_FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
