"""Atomic file writes: an interrupted run never leaves a truncated report in place of a good one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

__all__ = ["write_atomic"]


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


# mkstemp creates 0600 files; a report should get the mode any new file would (read once: umask is per process).
_NEW_FILE_MODE = 0o666 & ~_umask()


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` to a temporary file beside ``path``, then rename it over ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        if isinstance(data, bytes):
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
        else:
            # A lone surrogate (a truncated log, a file name that is not UTF-8) is written as its escape,
            # \udXXX: in a JSON string that is the JSON escape itself, so the value reads back unchanged.
            with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace", newline="\n") as handle:
                handle.write(data)
        os.chmod(tmp, path.stat().st_mode & 0o7777 if path.exists() else _NEW_FILE_MODE)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
