"""Who made a temporary directory or a container, so a later run can remove what a killed run left.

A SIGKILLed process runs no clean-up: its leftovers are named (directories) or labelled (containers) with
its pid and the pid's start time, and the next runtime removes those whose owner is gone. The start time
tells a recycled pid from the owner, so nothing of a live run is ever taken for a dead one's.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Callable


def _stat(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command's name (state first)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def start_time(pid: int) -> str | None:
    """The pid's start time in clock ticks since boot (None: no such process)."""
    fields = _stat(pid)
    return fields[19] if fields else None


def alive(pid: int, start: str | None) -> bool:
    """Whether the process that had this pid (and start time, where known) still runs; a zombie has
    ended (a killed run's orphans wait, exited, until init collects them)."""
    if Path("/proc/self/stat").exists():
        fields = _stat(pid)
        return fields is not None and fields[0] not in ("Z", "X") and (start is None or start == fields[19])
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owned_prefix(prefix: str) -> str:
    """A temporary name's prefix naming this process as its owner: ``prefix``, pid, start time."""
    return f"{prefix}{os.getpid()}-{start_time(os.getpid()) or 0}-"


def owner_of(path: Path, prefix: str, where: Path | None = None) -> tuple[int, str | None] | None:
    """(pid, start time) from a name made with :func:`owned_prefix` in ``where`` (the temporary directory
    by default); None for anything else (a name of an older version, which names no owner, is never
    taken for a dead run's)."""
    if path.parent != (where or Path(tempfile.gettempdir())) or not path.name.startswith(prefix):
        return None
    pid, start, *_ = path.name[len(prefix):].split("-") + ["", ""]
    if not pid.isdigit():
        return None
    return int(pid), (start if start not in ("", "0") else None)


def reap_dirs(prefix: str, remove: Callable[[Path], None], where: Path | None = None) -> list[Path]:
    """``remove`` each directory in ``where`` (the temporary directory by default) named with ``prefix``
    whose owner is gone; returns them."""
    removed = []
    where = where or Path(tempfile.gettempdir())
    for path in where.glob(f"{prefix}*"):
        owner = owner_of(path, prefix, where)
        if owner is not None and not alive(*owner):
            remove(path)
            removed.append(path)
    return removed


__all__ = ["alive", "owned_prefix", "owner_of", "reap_dirs", "start_time"]
