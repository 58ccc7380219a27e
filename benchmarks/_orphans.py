"""Counting the CPU time of every process a batch starts, the sandboxes' env servers included.

A process's rusage counts only the descendants that were waited for. A sandbox's env server is the child
of its launcher, and a sandbox stops by killing the launcher first: the server is then reparented (to the
machine's init) and its CPU time reaches no rusage of the batch, so a batch with the sandbox runtime
looked cheaper and less busy than it was. A process that makes itself the child subreaper adopts those
orphans instead; reaping them adds their time to its ``RUSAGE_CHILDREN``.
"""

from __future__ import annotations

import ctypes
import os
import time
from typing import Collection

PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> None:
    """Make this process the subreaper of everything it starts (Linux); elsewhere, a one-line warning."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(f"# warning: cannot adopt orphans ({os.strerror(ctypes.get_errno())}): the CPU of env servers "
              "whose launcher ended first is not counted")


# Helpers multiprocessing starts once per process (Dask's cluster starts its workers through them): they
# end with this process, not with the batch.
_HELPERS = (b"multiprocessing.resource_tracker", b"multiprocessing.forkserver")


def reap_orphans(timeout: float = 10.0, spare: Collection[int] = ()) -> int:
    """Wait for every child left (adopted orphans), at most ``timeout`` seconds; returns how many there
    were. One still running after that is a process the batch leaked: the figure is then refused.
    ``spare``: children started before the batch, for another purpose (a Dask cluster's), left alone."""
    reaped = 0
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid:
            reaped += 1
        elif not set(children()) - set(spare):
            return reaped
        elif time.monotonic() > deadline:
            raise SystemExit(f"processes the batch started still run {timeout:g} s after it ended")
        else:
            time.sleep(0.01)


def children() -> list[int]:
    """This process's children other than multiprocessing's own helpers (read from ``/proc``)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                parent = int(stat.read().rsplit(b")", 1)[1].split()[1])
            if parent != me:
                continue
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                if not any(helper in cmdline.read() for helper in _HELPERS):
                    found.append(int(entry))
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
    return found
