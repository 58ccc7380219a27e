"""How each process of a command ended, seen from outside the command.

A recorded command controls everything inside its own shell — its variables, its traps, every descriptor
it holds — so a report the shell writes about itself is a claim, not evidence. The tracer is the
command's parent, running as the env server's uid (root of the world's namespace) while the command runs
as a principal: the command can neither signal it, write to its descriptors, nor trace it. It follows the
command's processes with ptrace (fork, exec and exit events only: no syscall is stopped, so the command
runs at nearly full speed), and at each process's exit reads, from the kernel, how it ended. It writes
one JSON line per process that failed and a final line with the command's own status, on a pipe only the
env server reads, then exits; ``PTRACE_O_EXITKILL`` ends whatever it still traced.

The tracer also checks, when the command's shell exits, that the shell's own report channel (fd 62) is
still the pipe it was given and that no other descriptor holds it: a command that closed, replaced or
copied it has tampered with the shell's account.

Where ptrace is refused the command runs untraced, and the final line says so.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
from typing import Any, NoReturn

PTRACE_TRACEME, PTRACE_CONT = 0, 7
PTRACE_SETOPTIONS, PTRACE_GETEVENTMSG, PTRACE_GETSIGINFO = 0x4200, 0x4201, 0x4202
OPTIONS = (0x2 | 0x4 | 0x8  # follow fork, vfork, clone
           | 0x10  # exec events
           | 0x40  # exit events: the process is still there, with its status, argv and descriptors
           | 0x100000)  # EXITKILL: if the tracer ends, so does everything it traced
EVENT_FORK, EVENT_VFORK, EVENT_CLONE, EVENT_EXEC, EVENT_EXIT = 1, 2, 3, 4, 6
WALL = 0x40000000
MAX_FAILURES = 64  # records sent; the rest are counted
ARGV_BYTES = 512

_libc = ctypes.CDLL(None, use_errno=True)
_libc.ptrace.restype = ctypes.c_long
_libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]


def trace_me() -> bool:
    """In the command's process, just before exec: let the parent trace it (False where ptrace is refused)."""
    return _libc.ptrace(PTRACE_TRACEME, 0, None, None) == 0


def _cont(pid: int, sig: int = 0) -> None:
    _libc.ptrace(PTRACE_CONT, pid, None, ctypes.c_void_p(sig))


def _event_message(pid: int) -> int:
    value = ctypes.c_ulong(0)
    _libc.ptrace(PTRACE_GETEVENTMSG, pid, None, ctypes.byref(value))
    return value.value


def _signal_delivery(pid: int) -> bool:
    """A signal about to be delivered (True), or a group-stop (False)."""
    info = ctypes.create_string_buffer(128)
    return _libc.ptrace(PTRACE_GETSIGINFO, pid, None, info) == 0


def _argv(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read(ARGV_BYTES)
    except OSError:
        return []
    return [part.decode("utf-8", "backslashreplace") for part in raw.rstrip(b"\0").split(b"\0")]


def _is_thread(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            for line in handle:
                if line.startswith(b"Tgid:"):
                    return int(line.split()[1]) != pid
    except (OSError, ValueError, IndexError):
        pass
    return False


def channel_state(pid: int, fd: int, identity: str, owner: tuple[int, int] | None = None) -> str:
    """``intact``, ``closed``, ``replaced`` or ``copied``: what became of the shell's report descriptor.

    A process's descriptors are readable only to its own uid (or with CAP_SYS_PTRACE, which the runtimes
    drop): with ``owner`` the tracer reads them with that filesystem uid and gid.
    """
    if owner is not None:
        _libc.setfsgid(owner[1])
        _libc.setfsuid(owner[0])
    try:
        return _channel_state(pid, fd, identity)
    finally:
        if owner is not None:
            _libc.setfsuid(os.geteuid())
            _libc.setfsgid(os.getegid())


def _channel_state(pid: int, fd: int, identity: str) -> str:
    try:
        target = os.readlink(f"/proc/{pid}/fd/{fd}")
    except OSError:
        return "closed"
    if target != identity:
        return "replaced"
    try:
        names = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return "intact"
    for name in names:
        if name != str(fd):
            try:
                if os.readlink(f"/proc/{pid}/fd/{name}") == identity:
                    return "copied"
            except OSError:
                continue
    return "intact"


def supervise(main: int, out_fd: int, channel_fd: int | None, channel: str | None,
              owner: tuple[int, int] | None = None, max_processes: int | None = None) -> NoReturn:
    """Follow ``main`` (which called :func:`trace_me`) and its descendants until ``main`` ends, then exit.

    Writes to ``out_fd`` a line per failing process — ``{"pid", "status", "exec", "argv"}``, ``status``
    the raw wait status, ``exec`` whether it ran a program of its own (else it is a subshell of its parent)
    — and a final ``{"end": status, "traced": bool, "channel": state, "more": n}``. ``owner``: the uid and
    gid the command runs as, where it is not the tracer's own. ``max_processes``: a new process past this
    many live ones is killed before it runs its first instruction (where RLIMIT_NPROC cannot be per world).
    The final record counts them (``refused``).
    """
    out = os.fdopen(out_fd, "w", encoding="utf-8", buffering=1)
    started: set[int] = set()
    execd: set[int] = set()
    parent: dict[int, int] = {}
    last_child: dict[int, int] = {}  # a process's last child to exit -> its status
    traced = False
    state: str | None = None
    sent = more = refused = 0
    live = {main}
    unborn: set[int] = set()  # killed at birth: their end is the limit's doing, not a failure of the command

    def emit(record: dict[str, Any]) -> None:
        try:
            out.write(json.dumps(record) + "\n")
        except OSError:
            pass

    end = 0
    while True:
        try:
            pid, status = os.waitpid(-1, WALL)
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if os.WIFSTOPPED(status):
            sig, event = os.WSTOPSIG(status), status >> 16
            if pid not in started:  # a new process's first stop: main's exec trap, or a child's SIGSTOP
                started.add(pid)
                if pid == main:
                    traced = _libc.ptrace(PTRACE_SETOPTIONS, pid, None, ctypes.c_void_p(OPTIONS)) == 0
                    execd.add(pid)
                if sig in (signal.SIGSTOP, signal.SIGTRAP) and not event:
                    if pid != main:
                        live.add(pid)
                        if max_processes is not None and len(live) > max_processes:
                            refused += 1
                            unborn.add(pid)
                            _cont(pid, signal.SIGKILL)  # a tracer's signal needs no permission to kill
                            continue
                    _cont(pid)
                    continue
            if sig == signal.SIGTRAP and event:
                if event in (EVENT_FORK, EVENT_VFORK, EVENT_CLONE):
                    parent[_event_message(pid)] = pid
                elif event == EVENT_EXEC:
                    execd.add(pid)
                elif event == EVENT_EXIT:
                    live.discard(pid)
                    code = _event_message(pid)
                    if pid == main:
                        if channel_fd is not None and channel is not None:
                            state = channel_state(pid, channel_fd, channel, owner)
                    else:
                        explained = pid not in execd and last_child.get(pid) == code  # a subshell passing its
                        if pid in parent:  # child's status on
                            last_child[parent[pid]] = code
                        if code and not explained and pid not in unborn and not _is_thread(pid):
                            if sent < MAX_FAILURES:
                                sent += 1
                                emit({"pid": pid, "status": code, "exec": pid in execd, "argv": _argv(pid)})
                            else:
                                more += 1
                _cont(pid)
                continue
            _cont(pid, sig if _signal_delivery(pid) else 0)
            continue
        if pid == main:
            end = status
            break
    emit({"end": end, "traced": traced, "channel": state, "more": more, "refused": refused})
    out.close()
    os._exit(0)


__all__ = ["MAX_FAILURES", "channel_state", "supervise", "trace_me"]
