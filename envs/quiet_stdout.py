"""Keep what a benchmark's own code prints out of this process's standard output.

A bridge runs a benchmark's code (its tool functions, its checks), and some of it calls ``print()``
(AgentDojo's workspace and slack checks do). Standard output is where the command line writes its
table and its JSON, so nothing the benchmark prints may reach it: :func:`quiet_stdout` sends it nowhere,
for the code the current thread runs inside the block.

Why per thread, and not the obvious tools. ``contextlib.redirect_stdout`` swaps ``sys.stdout`` for the
whole process: a Dask worker replays several chunks at once in threads, and one thread's block would
swallow what another prints (or, as the blocks overlap and each restores what it found, leave stdout
swapped for good). Redirecting file descriptor 1 (``dup2``) is process-wide too, and would hide the
table the command line itself prints while a worker thread replays. So ``sys.stdout`` is replaced once,
and for good, by a stream that forwards every write to the stream it replaced, except the writes of a
thread inside a :func:`quiet_stdout` block. What it does not catch: writes to file descriptor 1 from C
code or a child process, and to ``sys.__stdout__``; the prints met so far are Python's ``print()``.
"""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager
from typing import Any, Iterator, TextIO

__all__ = ["quiet_stdout"]

_STATE = threading.local()  # .depth: how many quiet_stdout blocks this thread is in
_INSTALL = threading.Lock()


class _ThreadQuietStdout:
    """A text stream that forwards to ``stream``, but drops the writes of a thread in a quiet block."""

    def __init__(self, stream: TextIO):
        self._stream = stream

    def write(self, text: str) -> int:
        if getattr(_STATE, "depth", 0):
            return len(text)
        return self._stream.write(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if not getattr(_STATE, "depth", 0):
            self._stream.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno, buffer...: the stream's own
        return getattr(self._stream, name)


def _install() -> None:
    """Put the forwarding stream in front of whatever ``sys.stdout`` is now (once; again only when someone
    has replaced ``sys.stdout`` since, as a test runner capturing output does)."""
    with _INSTALL:
        if sys.stdout is not None and not isinstance(sys.stdout, _ThreadQuietStdout):
            sys.stdout = _ThreadQuietStdout(sys.stdout)  # type: ignore[assignment]


@contextmanager
def quiet_stdout() -> Iterator[None]:
    """Within the block, what this thread prints to ``sys.stdout`` is dropped; other threads print as before."""
    _install()
    _STATE.depth = getattr(_STATE, "depth", 0) + 1
    try:
        yield
    finally:
        _STATE.depth -= 1
