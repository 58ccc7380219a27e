"""The effective uid and gid of the calling thread alone, switched around each call of an isolated world.

The kernel keeps credentials per thread; POSIX wants them per process, so glibc's ``seteuid`` and
``setegid`` (behind :func:`os.seteuid`) stop every other thread of the process to make each take the same
change. An env server switches to the principal and back around every call, in its main thread, which
alone runs the domains' code and forks their commands; its other thread only watches the runtime's end
of the pipe. Switching the main thread alone, with the raw system calls, costs a quarter of glibc's round
trip (about 13 against 60 µs here) and changes nothing a call can see: every file access, fork and exec
of the call happens in the thread whose ids were switched.

On an architecture whose system-call numbers are not listed here, the glibc calls are used.
"""

from __future__ import annotations

import ctypes
import os

# (setresuid, setresgid) by machine, from the kernel's system-call tables.
_NUMBERS = {"x86_64": (117, 119), "amd64": (117, 119), "aarch64": (147, 149), "arm64": (147, 149)}
_KEEP = -1  # setres*id leaves an id given as -1 as it is


def _raw_calls():
    numbers = _NUMBERS.get(os.uname().machine.lower())
    if numbers is None:
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    setresuid, setresgid = numbers
    syscall = libc.syscall
    syscall.restype = ctypes.c_long

    def set_uid(uid: int) -> None:
        if syscall(setresuid, _KEEP, uid, _KEEP) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))

    def set_gid(gid: int) -> None:
        if syscall(setresgid, _KEEP, gid, _KEEP) != 0:
            error = ctypes.get_errno()
            raise OSError(error, os.strerror(error))

    return set_uid, set_gid


_RAW = _raw_calls()
set_thread_euid, set_thread_egid = _RAW if _RAW is not None else (os.seteuid, os.setegid)


def become(uid: int, gid: int) -> None:
    """Take ``uid`` and ``gid`` as this thread's effective ids (the gid first: it needs root)."""
    set_thread_egid(gid)
    set_thread_euid(uid)


def become_root() -> None:
    """Take root back as this thread's effective ids (the uid first: the gid needs it)."""
    set_thread_euid(0)
    set_thread_egid(0)
