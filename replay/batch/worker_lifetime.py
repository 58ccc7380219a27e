"""A pool worker ends with the process that started it, and on SIGTERM, closing its runtime first.

A worker waits for its next chunk on a queue whose writing end it holds itself: when the batch process
dies (an OOM kill, a SIGKILL, a SIGTERM), nothing tells it, and it would replay the chunks it holds into
nowhere, then idle for good with its sandboxes or containers. And a SIGTERM turned into ``SystemExit``
does not end it either: the pool's worker loop catches it as the chunk's failure and waits for the next.

So a thread watches the parent (a pidfd: it is the process, not the thread that forked this one, that
counts) and this process's SIGTERM (through the interpreter's wake-up fd, written by the C-level handler
even while the main thread is busy in native code); on either it closes the runtime (bounded in time)
and exits.
"""

from __future__ import annotations

import ctypes
import os
import select
import signal
import threading
from typing import Callable

CLOSE_TIMEOUT = 60.0  # s; a runtime that does not close by then (an engine that hangs) is left to the reaper
PR_SET_PDEATHSIG = 1
EXIT_PARENT_GONE = 1


def end_with_parent(parent: int, close: Callable[[], None]) -> None:
    """From now on, when process ``parent`` ends or this process gets SIGTERM, call ``close`` and exit.

    Call once, from the main thread (it installs the SIGTERM handler and the wake-up fd)."""
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.signal(signal.SIGTERM, lambda signum, frame: None)  # the wake-up fd carries it to the watcher
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    try:
        watched: int | None = os.pidfd_open(parent)
    except (AttributeError, OSError):  # no pidfds (Linux < 5.3): a parent-death signal, i.e. a SIGTERM
        watched = None
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # gone before we watched it
        os.write(wake_w, bytes([signal.SIGTERM]))
    threading.Thread(target=_watch, args=(wake_r, watched, close), name="end with parent", daemon=True).start()


def _watch(wake_r: int, parent: int | None, close: Callable[[], None]) -> None:
    watched = [wake_r] + ([parent] if parent is not None else [])
    while True:
        ready, _, _ = select.select(watched, [], [])
        if parent in ready:  # a pidfd is readable once its process has exited
            _close_and_exit(close, EXIT_PARENT_GONE)
        if wake_r in ready and signal.SIGTERM in os.read(wake_r, 64):  # other signals keep their handlers
            _close_and_exit(close, 128 + signal.SIGTERM)


def _close_and_exit(close: Callable[[], None], status: int) -> None:
    closing = threading.Thread(target=_quietly, args=(close,), name="close at exit", daemon=True)
    closing.start()
    closing.join(CLOSE_TIMEOUT)
    os._exit(status)


def _quietly(close: Callable[[], None]) -> None:
    try:
        close()
    except BaseException:  # exiting anyway; what is left, the next run's reaper removes
        pass


__all__ = ["end_with_parent"]
