"""Running one recorded command as a principal: bounded in time, output, memory and processes, and
leaving nothing behind.

Only the shell domain's real semantics use this, and only in an isolated world (a sandbox or a container),
where the env server runs as root of its namespace. The child first enters the command's own root (the
world at its absolute paths, see :mod:`._command_root`), then sheds every capability for good
(:func:`_shed_capabilities`: an empty bounding set, no inheritable or ambient ones, securebits so that uid 0
gains none at exec, all locked, and no-new-privs), then takes the principal's uid fully (``setresuid``, no
supplementary groups) before it execs, so the kernel decides what the command may touch. Where every
principal shares the server's one uid (a sandbox without subordinate ids), the child keeps that uid and
execs without any capability all the same, as the first process of a pid namespace of its own
(``own_pids``), so it can neither see nor signal the server. When the command ends, times out or floods its output, everything still running as that uid is killed
(a helper process that becomes the principal and ``kill(-1, SIGKILL)``s until nothing answers), and the
server — a child subreaper — reaps every descendant before it answers, so no background process or fork
bomb outlives the call. Between the server and the command sits a tracer (:mod:`._trace`), the command's
parent, that records how each of its processes ended.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import json
import os
import resource
import select
import signal
import time
from dataclasses import dataclass, field

from . import _trace
from ._command_root import RootPlan, enter, own_proc

KEEP = 64 * 1024  # bytes of each stream kept in the outcome; the rest is read and discarded
HARD_CAP = 8 * 1024 * 1024  # bytes of output (both streams) after which the command is killed
EVIDENCE_FD = 62  # where the shell prelude reports swallowed errors
EVIDENCE_CAP = 64 * 1024
TRACE_CAP = 256 * 1024  # the tracer sends at most _trace.MAX_FAILURES records and a final one
REAP_GRACE = 2.0  # s to kill and reap what a command left behind
PR_SET_CHILD_SUBREAPER = 36
PR_CAPBSET_DROP, PR_SET_SECUREBITS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 28, 47, 4
PR_SET_NO_NEW_PRIVS = 38
CLONE_NEWPID = 0x20000000
_LINUX_CAPABILITY_VERSION_3 = 0x20080522
# uid 0 gains no capabilities at exec, and no ambient ones can be raised again, for good
SECBITS_NO_CAPABILITIES = (1 << 0) | (1 << 1) | (1 << 6) | (1 << 7)  # NOROOT, NO_CAP_AMBIENT_RAISE, and locks


_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


@dataclass(frozen=True)
class Limits:
    """Per-process rlimits of a command (``cpu`` is derived from the call's timeout). ``processes`` None:
    no RLIMIT_NPROC — where the uid's count is shared with other worlds and a pids cgroup bounds this one."""

    processes: int | None = 64
    traced_processes: int | None = None  # bound the command's live processes in the tracer instead
    memory: int = 512 * 1024 * 1024
    file_size: int = 16 * 1024 * 1024
    open_files: int = 256


@dataclass(frozen=True)
class Command:
    executable: str
    argv: list[str]
    env: dict[str, str]
    cwd: str
    timeout: float
    uid: int | None = None  # None: run as the server's own uid (no switching possible)
    gid: int | None = None
    limits: Limits = field(default_factory=Limits)
    root: RootPlan | None = None  # the command's own root (None: the server's), made at ``root_mountpoint``
    root_mountpoint: str = ""
    own_pids: bool = False  # a pid namespace of its own: it can neither see nor signal the server's processes


@dataclass
class Result:
    exit_code: int
    signal: int | None
    stdout: bytes
    stderr: bytes
    truncated: bool
    timed_out: bool
    overflowed: bool
    evidence: list[str]
    leftovers: int  # processes still there after the command's own process ended (killed)
    elapsed: float
    trace: "Trace"


class SpawnError(OSError):
    """The command could not start: ``stage`` says where (``pids``, ``root``, ``capabilities``, ``chdir``,
    ``exec``)."""

    def __init__(self, code: int, stage: str, detail: str = ""):
        super().__init__(code, detail or os.strerror(code))
        self.stage = stage


def become_subreaper() -> bool:
    """Orphans of our commands reparent to us, so we can reap (and count) every one of them."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def run(command: Command) -> Result:
    """Run a command to completion, timeout or output overflow, then kill and reap all it left.

    The command's parent is a tracer (:mod:`._trace`) that records how each of its processes ended; the
    tracer is the process this one watches, and its last record carries the command's own status.
    """
    started = time.monotonic()
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    ev_r, ev_w = os.pipe()
    trace_r, trace_w = os.pipe()
    exec_r, exec_w = os.pipe2(os.O_CLOEXEC)
    child_fds = {1: out_w, 2: err_w, EVIDENCE_FD: ev_w}
    channel = f"pipe:[{os.fstat(ev_w).st_ino}]"
    pid = os.fork()
    if pid == 0:  # pragma: no cover  (the tracer exits)
        _tracer(command, child_fds, exec_w, trace_w, channel)
    for fd in (out_w, err_w, ev_w, exec_w, trace_w):
        os.close(fd)
    try:
        failure = _read_all(exec_r)
    finally:
        os.close(exec_r)
    if failure:
        os.waitpid(pid, 0)
        for fd in (out_r, err_r, ev_r, trace_r):
            os.close(fd)
        stage, _, rest = failure.decode("utf-8", "replace").partition(":")
        code, _, detail = rest.partition(":")
        raise SpawnError(int(code) if code.isdigit() else errno.EIO, stage, detail)
    watch = _Watch(pid, {out_r: "stdout", err_r: "stderr", ev_r: "evidence", trace_r: "trace"})
    try:
        watch.until(started + command.timeout)
        leftovers = _kill_and_reap(command, watch)
        watch.drain(time.monotonic() + 0.5)
    finally:
        watch.close()
    trace = _trace_records(bytes(watch.kept["trace"]))
    status = trace.end if trace.end is not None else (watch.status if watch.status is not None else 0)
    sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
    exit_code = 128 + sig if sig is not None else os.waitstatus_to_exitcode(status)
    evidence = watch.kept["evidence"].decode("utf-8", "replace").splitlines()
    return Result(
        exit_code=exit_code,
        signal=sig,
        stdout=bytes(watch.kept["stdout"]),
        stderr=bytes(watch.kept["stderr"]),
        truncated=watch.truncated,
        timed_out=watch.timed_out,
        overflowed=watch.overflowed,
        evidence=[line for line in evidence if line.strip()],
        leftovers=leftovers,
        elapsed=time.monotonic() - started,
        trace=trace,
    )


def _tracer(command: Command, fds: dict[int, int], exec_w: int, trace_w: int, channel: str) -> None:  # pragma: no cover
    """In the forked tracer: start the command as its traced child, then follow it (never returns)."""
    try:
        os.setsid()
        if command.own_pids:  # the command is the first process of a pid namespace; the tracer stays outside
            libc = ctypes.CDLL(None, use_errno=True)
            if libc.unshare(CLONE_NEWPID) != 0:
                _report(exec_w, f"pids:{ctypes.get_errno() or errno.EIO}:unshare(CLONE_NEWPID)")
                os._exit(127)
        child = os.fork()
        if child == 0:
            _child(command, fds, exec_w)
        null = os.open(os.devnull, os.O_RDWR)  # the server's own streams may be its protocol: never hold them
        for fd in (0, 1):
            os.dup2(null, fd)
        keep = fcntl.fcntl(trace_w, fcntl.F_DUPFD_CLOEXEC, 3)
        os.closerange(3, keep)
        os.closerange(keep + 1, max(keep + 2, resource.getrlimit(resource.RLIMIT_NOFILE)[0]))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        owner = (command.uid, command.gid) if command.uid is not None and command.gid is not None else None
        _trace.supervise(child, keep, EVIDENCE_FD, channel, owner, command.limits.traced_processes)
    finally:
        os._exit(70)


@dataclass
class Trace:
    """What the tracer saw: the processes that failed, the command's status, the shell's report channel."""

    failures: list[dict] = field(default_factory=list)
    more: int = 0
    end: int | None = None  # raw wait status of the command's process (None: the tracer did not finish)
    traced: bool = False
    channel: str | None = None  # intact, closed, replaced, copied (None: not checked)
    refused: int = 0  # new processes killed at birth, past the command's process limit


def _trace_records(raw: bytes) -> Trace:
    trace = Trace()
    for line in raw.decode("utf-8", "replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        if "end" in record:
            trace.end, trace.traced = int(record["end"]), bool(record.get("traced"))
            trace.channel, trace.more = record.get("channel"), int(record.get("more") or 0)
            trace.refused = int(record.get("refused") or 0)
        else:
            trace.failures.append(record)
    return trace


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 4096):
        chunks.append(chunk)
    return b"".join(chunks)


def _child(command: Command, fds: dict[int, int], exec_w: int) -> None:  # pragma: no cover
    """In the forked child: become the principal, bound the process, exec. Never returns."""
    stage, report = "setup", exec_w
    try:
        for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)  # Python ignores SIGPIPE/SIGXFSZ; exec keeps ignored ones
        # Move every descriptor out of the way first, so placing one never clobbers another.
        high = {target: fcntl.fcntl(source, fcntl.F_DUPFD_CLOEXEC, 100) for target, source in fds.items()}
        report = fcntl.fcntl(exec_w, fcntl.F_DUPFD_CLOEXEC, 100)
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        for target, source in high.items():
            os.dup2(source, target)
        start = 0
        for fd in sorted({0, report, *fds}):
            if start < fd:  # closerange(n, n) would close everything (CPython passes n - 1 on)
                os.closerange(start, fd)
            start = fd + 1
        os.closerange(start, max(start + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0]))
        if command.root is not None:
            stage = "root"
            enter(command.root, command.root_mountpoint)
            if command.own_pids:
                own_proc()
        stage = "capabilities"
        _shed_capabilities()
        stage = "setup"
        if command.uid is not None and command.gid is not None:
            os.setgroups([])
            os.setresgid(command.gid, command.gid, command.gid)
            os.setresuid(command.uid, command.uid, command.uid)
        stage = "chdir"
        os.chdir(command.cwd)  # as the principal: the kernel decides whether it may
        stage = "setup"
        cpu = int(command.timeout) + 2
        limits = command.limits
        for res, value in ((resource.RLIMIT_NPROC, limits.processes), (resource.RLIMIT_AS, limits.memory),
                           (resource.RLIMIT_FSIZE, limits.file_size), (resource.RLIMIT_NOFILE, limits.open_files),
                           (resource.RLIMIT_CPU, cpu), (resource.RLIMIT_CORE, 0)):
            if value is None:
                continue
            soft, hard = resource.getrlimit(res)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(res, (value, value))
        os.umask(0o022)
        stage = "exec"
        _trace.trace_me()  # where ptrace is refused the command runs untraced (the tracer says so)
        os.execve(command.executable, command.argv, command.env)
    except OSError as exc:
        _report(report, f"{stage}:{exc.errno or errno.EIO}:{exc.strerror or ''}"[:512])
    except BaseException:
        _report(report, f"{stage}:{errno.EIO}")
    os._exit(127)


def _shed_capabilities() -> None:  # pragma: no cover  (runs in the forked child)
    """Leave the command no capability and no way back, whatever uid it runs as.

    Empties the bounding set (no exec can grant a capability again), clears the inheritable and ambient
    sets, sets and locks securebits so that uid 0 gains nothing at exec, and sets no-new-privs (setuid
    and file capabilities are ignored). Needs ``CAP_SETPCAP``, which the isolated runtimes give their
    server for this. The permitted and effective sets the server's uid still holds go at ``setresuid`` to
    a principal or, for uid 0, at exec."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last = int(handle.read())
    except (OSError, ValueError):
        last = 63
    for cap in range(last + 1):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")
    _clear_inheritable(libc)
    if (libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0
            or libc.prctl(PR_SET_SECUREBITS, SECBITS_NO_CAPABILITIES, 0, 0, 0) != 0
            or libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0):
        raise OSError(ctypes.get_errno(), "prctl")


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _clear_inheritable(libc: ctypes.CDLL) -> None:  # pragma: no cover  (runs in the forked child)
    """Empty the inheritable set (a runtime may leave the server's there), keeping the others for now."""
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    if libc.capget(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capget")
    for half in data:
        half.inheritable = 0
    if libc.capset(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), "capset")


def _report(fd: int, message: str) -> None:  # pragma: no cover
    try:
        os.write(fd, message.encode())
    except OSError:
        pass


class _Watch:
    """The command's main process and its output pipes, read with ``select`` until a deadline."""

    def __init__(self, pid: int, streams: dict[int, str]):
        self.pid = pid
        self.streams = dict(streams)
        self.kept = {name: bytearray() for name in streams.values()}
        self.total = 0
        self.status: int | None = None
        self.truncated = self.timed_out = self.overflowed = False
        try:
            self.pidfd: int | None = os.pidfd_open(pid)
        except (AttributeError, OSError):
            self.pidfd = None

    def until(self, deadline: float) -> None:
        """Read output until the main process exits, the deadline passes or the output overflows."""
        while self.status is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.timed_out = True
                return
            waits = list(self.streams) + ([self.pidfd] if self.pidfd is not None else [])
            ready, _, _ = select.select(waits, [], [], remaining if self.pidfd is not None else min(remaining, 0.02))
            for fd in ready:
                if fd != self.pidfd:
                    self._read(fd)
                    if self.overflowed:
                        return
            self._poll()

    def _poll(self) -> None:
        if self.status is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.status = status

    def reaped(self, pid: int, status: int) -> None:
        if pid == self.pid:
            self.status = status

    def _read(self, fd: int) -> None:
        try:
            chunk = os.read(fd, 1 << 16)
        except OSError:
            chunk = b""
        if not chunk:
            os.close(fd)
            del self.streams[fd]
            return
        name = self.streams[fd]
        limit = {"evidence": EVIDENCE_CAP, "trace": TRACE_CAP}.get(name, KEEP)
        kept = self.kept[name]
        room = limit - len(kept)
        if room > 0:
            kept += chunk[:room]
        if len(chunk) > room and name in ("stdout", "stderr"):
            self.truncated = True
        if name in ("stdout", "stderr"):
            self.total += len(chunk)
            if self.total > HARD_CAP:
                self.overflowed = True

    def drain(self, deadline: float) -> None:
        """Read what the (now dead) writers left in the pipes, up to their end or the deadline."""
        while self.streams and (remaining := deadline - time.monotonic()) > 0 and not self.overflowed:
            ready, _, _ = select.select(list(self.streams), [], [], remaining)
            if not ready:
                return
            for fd in ready:
                self._read(fd)

    def close(self) -> None:
        for fd in list(self.streams):
            os.close(fd)
        self.streams.clear()
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def _kill_and_reap(command: Command, watch: _Watch) -> int:
    """Kill the command's session and everything running as its uid; reap all our children.

    Returns how many processes were still there (running or unreaped) besides the main one.
    """
    deadline = time.monotonic() + REAP_GRACE
    others = len([p for p in _children() if p != watch.pid])
    try:
        os.killpg(watch.pid, signal.SIGKILL)
    except OSError:
        pass
    switched = command.uid is not None and command.uid != os.getuid()
    while True:
        if switched:
            _kill_as(command.uid, command.gid)  # type: ignore[arg-type]
        for pid in _descendants():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        _reap(watch)
        if watch.status is not None and not _children() or time.monotonic() >= deadline:
            return others
        time.sleep(0.002)


def _kill_as(uid: int, gid: int) -> None:
    """Fork a helper that becomes the principal and SIGKILLs every process it may signal.

    A fork bomb can fill the world's pids cgroup (with processes and unreaped zombies): then there is no
    helper this round; the tracer's end (``PTRACE_O_EXITKILL``) kills what it traced, the reaping frees
    pids, and the next round forks again.
    """
    try:
        helper = os.fork()
    except BlockingIOError:
        return
    if helper == 0:  # pragma: no cover  (the helper exits)
        try:
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)
            for _ in range(64):
                try:
                    os.kill(-1, signal.SIGKILL)
                except ProcessLookupError:  # nothing of this uid is left (zombies still count as there)
                    break
        finally:
            os._exit(0)
    os.waitpid(helper, 0)


def _reap(watch: _Watch) -> None:
    """Reap the children that have exited (the main process, and orphans reparented to us)."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if not pid:
            return
        watch.reaped(pid, status)


def _children() -> list[int]:
    """Our direct children (with the subreaper set, a command's orphans are among them)."""
    me = os.getpid()
    try:
        with open(f"/proc/{me}/task/{me}/children") as handle:
            return [int(p) for p in handle.read().split()]
    except OSError:
        return []


def _descendants() -> list[int]:
    """Every process under this one, by walking /proc/<pid>/task/<pid>/children."""
    found, frontier = [], _children()
    while frontier:
        pid = frontier.pop()
        found.append(pid)
        try:
            with open(f"/proc/{pid}/task/{pid}/children") as handle:
                frontier.extend(int(p) for p in handle.read().split())
        except OSError:
            pass
    return found
