"""A world's total memory, bounded by a memory cgroup per sandbox where the host lets us make one.

RLIMIT_AS bounds each process, not their sum: twenty processes of 400 MiB are 8 GB. Where this process
may make a child of its own memory cgroup — cgroup v2 with the memory controller enabled for its
children, or cgroup v1's memory hierarchy, writable (root's usually is) — each sandbox gets one, its
launcher is moved into it before the sandbox starts (everything it starts stays there), and when the
world's processes together pass the limit the kernel's OOM killer acts inside it: the host never feels
it. Elsewhere :func:`find` says why, and the runtime says so once and lowers its per-process cap.

A cgroup is named for its owner process (see :mod:`.owner`), so the next run removes those a SIGKILL left.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from dataclasses import dataclass
from itertools import count
from pathlib import Path

from .owner import owned_prefix, reap_dirs

PREFIX = "litmus-sandbox-"
_NUMBERS = count(1)
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Parent:
    """The cgroup sandboxes' cgroups are made in, and its hierarchy's version."""

    path: Path
    version: int

    @property
    def limit_files(self) -> tuple[str, str]:
        """Memory, then memory and swap together (v1) or swap alone (v2)."""
        return ("memory.max", "memory.swap.max") if self.version == 2 else ("memory.limit_in_bytes",
                                                                              "memory.memsw.limit_in_bytes")

    def reap(self) -> list[Path]:
        """Remove the cgroups of runs that are gone (empty: their processes died with them)."""
        return reap_dirs(PREFIX, _rmdir_quietly, self.path)


def _mounts() -> list[tuple[str, str, str, set[str]]]:
    """(root, mount point, type, super options) of every cgroup mount this process sees."""
    found = []
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return found
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[3], fields[4], tail[0], set(tail[2].split(","))))
    return found


def _under(mount_root: str, point: str, path: str) -> Path | None:
    """The directory of cgroup ``path`` under a mount of the hierarchy's ``mount_root`` at ``point``."""
    root = mount_root.rstrip("/")
    if path != root and not path.startswith(root + "/"):
        return None
    return Path(point + path[len(root):])


def find() -> tuple[Parent | None, str]:
    """Where sandboxes' memory cgroups can be made (this process's own cgroup), or None and why not."""
    try:
        own = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None, "this host has no cgroups"
    mounts = _mounts()
    for line in own:
        hierarchy, _, path = line.partition(":")[2].partition(":")
        if hierarchy == "":  # cgroup v2
            for root, point, kind, _ in mounts:
                where = _under(root, point, path) if kind == "cgroup2" else None
                if where is None:
                    continue
                try:
                    delegated = "memory" in (where / "cgroup.subtree_control").read_text().split()
                except OSError:
                    delegated = False
                if delegated and os.access(where, os.W_OK):
                    return Parent(where, 2), ""
        elif "memory" in hierarchy.split(","):  # cgroup v1's memory hierarchy
            for root, point, kind, options in mounts:
                where = _under(root, point, path) if kind == "cgroup" and "memory" in options else None
                if where is not None and os.access(where, os.W_OK) and (where / "cgroup.procs").exists():
                    return Parent(where, 1), ""
    return None, "no memory cgroup is delegated to this process (cgroup v2's memory controller for its children, or a writable cgroup v1 memory hierarchy)"


class Group:
    """One sandbox's memory cgroup: made with its limit, given the launcher, removed once empty."""

    def __init__(self, parent: Parent, limit: int):
        with _LOCK:
            number = next(_NUMBERS)
        self.path = parent.path / f"{owned_prefix(PREFIX)}{number}"
        self.path.mkdir()
        try:
            memory, with_swap = parent.limit_files
            (self.path / memory).write_text(str(limit))
            try:  # no swap on top (v1: memory and swap together; v2: swap alone); absent without swap accounting
                (self.path / with_swap).write_text(str(limit if parent.version == 1 else 0))
            except OSError:
                pass
        except OSError:
            self.remove()
            raise

    def add(self, pid: int) -> None:
        (self.path / "cgroup.procs").write_text(str(pid))

    def remove(self) -> None:
        """Remove the cgroup once its processes are gone (the kernel may take a moment to let go of them)."""
        for _ in range(50):
            try:
                _rmdir(self.path)
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY:
                    return
            time.sleep(0.02)


def _rmdir_quietly(path: Path) -> None:
    try:
        _rmdir(path)
    except OSError:  # still busy: the next run tries again
        pass


def _rmdir(path: Path) -> None:
    try:
        path.rmdir()  # a cgroup's control files are not files: rmdir is how it goes
    except FileNotFoundError:
        pass


__all__ = ["Group", "Parent", "find"]
