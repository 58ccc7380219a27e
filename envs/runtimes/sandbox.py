"""The ``sandbox`` runtime: each world's env server in fresh Linux namespaces (the default for real semantics).

Each world gets its own sandbox: ``python3 -S -m litmus_replay.envs.server --stdio --isolated --switch-uid
--world-root /world`` as uid 0 of a fresh user namespace whose uids 0-65535 map to unprivileged host ids
— run as root, a host range nobody else holds (``uid_base``, by default from 0x70000000); run as an ordinary user, its own uid and its
subordinate ids, or only its own uid where it has none (see :mod:`._idmap`; the server then runs with
``--shared-uid``) — in fresh mount, pid, net, ipc and uts namespaces. Its root is a
read-only tmpfs holding read-only binds of ``/usr`` (``/bin``, ``/lib*`` as the host has them: symlinks
under usr-merge), the Python installation, this package, pyfakefs and the code the world's domains
declare (see :mod:`.hosting`); a generated ``/etc`` (passwd and
group list the world's principals, unless its domains all keep their state in memory and so read no file;
nothing of the host's but ``ld.so.cache``); a private ``/tmp``; a
size-limited tmpfs at ``/world`` where the server lays the world out; ``/proc`` of the new pid namespace and
a minimal ``/dev``. The network namespace holds only loopback. Every process in it runs with no-new-privs,
under rlimits (address space, processes, CPU, file size, no core dumps), and the server keeps only the
capabilities it needs (chown, dac_override, fowner, kill, setuid, setgid, and setpcap to exec each command
without any) inside its namespace, so each call runs under the principal's uid and the kernel decides file
access. Where the principals share one uid (``single-uid``), it keeps dac_override, fowner and setpcap, and
the files domain decides access itself. A sandbox made for a world with a shell adds sys_admin and
sys_chroot, over its own namespace only, to make each command's root (see :func:`server_capabilities`). Every command execs with an
empty bounding set and no capability (see :mod:`..domains._command`), and the world's uid 0 acts as an
unprivileged stand-in, never as the server's uid (see :mod:`..principal_ids`).

``_launcher.py`` does the privileged part (see its docstring); the namespaces and the root are made by
bubblewrap where ``bwrap`` is installed (Debian: ``apt-get install bubblewrap``), else by the launcher
itself with unshare(2), mount(2) and pivot_root(2). The runtime speaks the env server protocol over the
launcher's pipes; closing a world kills the sandbox (the namespace's pid 1 dies, and everything with it).
A per-call timeout on the client is the backstop: a call that does not answer in time kills the sandbox
and the engine records a harness error.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from ..client import EnvClient, Reply, checked_hello
from ..domain import NOBODY, Semantics
from ..errors import EnvError, RuntimeUnavailable, WorldSpecError
from ..interface import PendingWorld, Runtime, WorldHandle
from ..principal_ids import check_isolable, kernel_id
from ..world import parse_principals
from . import _idmap, _launcher, hosting, memory_cgroup
from ._idmap import UID_COUNT, IdMap, MappingUnavailable
from .hosting import MOUNT_ROOT, Mount
from .owner import owned_prefix, reap_dirs
from .pool import Pool, PooledWorld, begin_on

LAUNCHER = Path(__file__).with_name("_launcher.py")
WORLD_ROOT = "/world"
SERVER_ARGS = ("-S", "-m", "litmus_replay.envs.server", "--stdio", "--isolated", "--switch-uid",
               "--world-root", WORLD_ROOT)
# Principals sharing one uid: the server keeps what it needs to lay a world out whatever its modes, and
# CAP_SETPCAP to exec commands without capabilities (it cannot switch uids, so it needs no others). With a
# uid per principal it keeps every capability the launcher names, CAP_SETPCAP included for the same reason.
SHARED_UID_CAPS = ("CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_SETPCAP")
# A world whose domains run commands in a root made from the world (a shell): a mount namespace and a
# chroot per command, made in the forked child, which then sheds every capability before it execs.
COMMAND_ROOT_CAPS = ("CAP_SYS_ADMIN", "CAP_SYS_CHROOT")
SYSTEM_DIRS = ("bin", "sbin", "lib", "lib32", "lib64", "libx32")
HOSTNAME = "litmus"
PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
HINT = "use --runtime docker or --runtime inprocess"
STAGING_PREFIX = "litmus-sandbox-"  # then the owner's pid and start time (see .owner)
MiB = 1024 * 1024
_CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


# Where no memory cgroup bounds a sandbox's processes together, each is held to this much address space.
FALLBACK_MEMORY = 512 * MiB

# A reused sandbox's server accumulates CPU time against RLIMIT_CPU: it is retired once it has used this
# share of it, or, where its CPU time cannot be read, after this many worlds.
RETIRE_AT_CPU_SHARE = 0.5
WORLDS_PER_SANDBOX = 200


@dataclass(frozen=True)
class SandboxOptions:
    """What ``get_runtime("sandbox", **options)`` accepts."""

    call_timeout: float = 30.0  # s; the backstop per call (raised per world above its domains' longest call)
    start_timeout: float = 15.0  # s; for a sandbox's server to answer hello
    memory: int = 1024 * MiB  # RLIMIT_AS of every process in the sandbox (at most FALLBACK_MEMORY where no
    #                           memory cgroup bounds them together)
    world_memory: int = 1024 * MiB  # every process of a sandbox together: its memory cgroup's limit
    disk: int = 64 * MiB  # the /world tmpfs
    tmp: int = 16 * MiB  # the /tmp tmpfs
    processes: int = 256  # RLIMIT_NPROC
    cpu: int = 600  # RLIMIT_CPU, s of CPU time for the server
    file_size: int = 64 * MiB  # RLIMIT_FSIZE
    uid_base: int | None = None  # as root: host uid of the sandbox's root, inner uid u is host uid uid_base + u;
    #                             None: the first block of 65,536 ids from 0x70000000 that no user, group or
    #                             subordinate range holds (see _idmap.host_range); one that overlaps is refused
    id_mapping: str = "auto"  # "auto" (the strongest available), "host-range" (root), "subordinate"
    #                           (an ordinary user's /etc/subuid range), "single-uid" (principals share one uid)
    backend: str = "auto"  # "auto" (bwrap if installed), "bwrap" or "native"
    warm: bool = True  # keep one sandbox booting for the next world of the same key (its /etc and mounts)
    reuse: int = 8  # idle sandboxes kept, least recently used first out, for the next worlds of the same key
    #                 (a batch cycles through its tasks' few keys; in-memory worlds share one); 0: never reuse

    def __post_init__(self) -> None:
        for name in ("call_timeout", "start_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive")
        for name in ("memory", "world_memory", "disk", "tmp", "processes", "cpu", "file_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer")
        if self.uid_base is not None and not 0 < self.uid_base <= 2**32 - 2 - UID_COUNT:
            raise ValueError(f"uid_base must leave room for {UID_COUNT} uids below 2**32 - 1")
        if self.backend not in ("auto", "bwrap", "native"):
            raise ValueError("backend must be 'auto', 'bwrap' or 'native'")
        if self.id_mapping not in _idmap.MODES:
            raise ValueError(f"id_mapping must be one of {', '.join(repr(m) for m in _idmap.MODES)}")


# --- the sandbox's root ------------------------------------------------------------------------------


def _python() -> tuple[str, str]:
    """The interpreter the server runs with (this one) and the installation prefix it needs."""
    executable = os.path.realpath(sys.executable)
    prefix = os.path.realpath(sys.base_prefix)
    if not executable.startswith(prefix.rstrip("/") + "/"):
        raise RuntimeUnavailable(f"the sandbox runtime cannot run here: {executable} lies outside its prefix {prefix}; {HINT}")
    return executable, prefix


def _base_mounts() -> tuple[Mount, ...]:
    try:
        return hosting.base_mounts()
    except RuntimeUnavailable as exc:
        raise RuntimeUnavailable(f"the sandbox runtime cannot run here: {exc}".replace("use --runtime inprocess", HINT)) from None


def etc_files(principals: Mapping[str, Mapping[str, Any]], switch_uid: bool = True) -> dict[str, str]:
    """The sandbox's /etc: its principals as users (with the ids they act with), and nothing of the host's."""
    users = [("root", 0, 0, "/root")]
    groups: dict[int, str] = {0: "root"}
    for name, attrs in principals.items():
        if not name or any(c in name for c in ":\n\0,") or name in ("root", "nobody"):
            continue
        uid, gid = int(attrs["uid"]), int(attrs["gid"])
        if switch_uid:
            uid, gid = kernel_id(uid), kernel_id(gid)
        users.append((name, uid, gid, f"/home/{name}"))
        groups.setdefault(gid, name)
    users.append(("nobody", NOBODY, NOBODY, "/nonexistent"))
    groups.setdefault(NOBODY, "nogroup")
    passwd = "".join(f"{n}:x:{u}:{g}:{n}:{h}:/bin/sh\n" for n, u, g, h in users)
    group = "".join(f"{name}:x:{gid}:\n" for gid, name in sorted(groups.items()))
    hosts = f"127.0.0.1\tlocalhost\n::1\tlocalhost\n127.0.1.1\t{HOSTNAME}\n"
    nsswitch = "passwd: files\ngroup: files\nhosts: files\n"
    return {"/etc/passwd": passwd, "/etc/group": group, "/etc/hosts": hosts, "/etc/nsswitch.conf": nsswitch}


def root_plan(options: SandboxOptions, data: Mapping[str, int], mounts: tuple[Mount, ...] = ()) -> tuple[list[str], list[list[Any]]]:
    """The bind sources and the ordered operations that build the sandbox's root (see ``_launcher``).

    ``data`` maps each generated file's path to the descriptor holding its content; ``mounts`` is the code
    the world's domains need beyond this package and pyfakefs.
    """
    executable, prefix = _python()
    sources: list[str] = []
    binds: list[list[Any]] = []
    links: list[list[Any]] = []

    def bind(source: str, dest: str) -> None:
        sources.append(source)
        binds.append(["bind", len(sources) - 1, dest])

    bind("/usr", "/usr")
    for name in SYSTEM_DIRS:
        path = f"/{name}"
        if os.path.islink(path):
            links.append(["symlink", os.readlink(path), path])
        elif os.path.isdir(path):
            bind(path, path)
    if not any(prefix == f"/{d}" or prefix.startswith(f"/{d}/") for d in ("usr", *SYSTEM_DIRS)):
        bind(prefix, prefix)
    for mount in (*_base_mounts(), *mounts):
        bind(mount.source, mount.destination)
    if os.path.isfile("/etc/ld.so.cache"):
        bind("/etc/ld.so.cache", "/etc/ld.so.cache")
    files = [["data", fd, path, 0o644] for path, fd in data.items()]
    # Every directory above a bind or a file, world-readable: the server reads its modules and the
    # commands read /etc while acting as a principal (bwrap would make them 0700).
    parents = sorted({p for op in (*binds, *files) for p in _ancestors(op[2])} | {"/etc"}, key=lambda p: p.count("/"))
    dirs = [["dir", p, 0o755] for p in parents if p not in {link[2] for link in links}]
    ops = [*dirs, *binds, *links, *files,
           ["tmpfs", "/tmp", options.tmp, 0o1777], ["tmpfs", WORLD_ROOT, options.disk, 0o755],
           ["proc", "/proc"], ["dev", "/dev"], ["remount-ro", "/"]]
    return sources, ops


def _ancestors(path: str) -> list[str]:
    parts = path.strip("/").split("/")[:-1]
    return ["/" + "/".join(parts[: i + 1]) for i in range(len(parts))]


def _backend(options: SandboxOptions) -> str | None:
    """The bwrap binary to use, or None for the launcher's own namespaces."""
    bwrap = shutil.which("bwrap")
    if options.backend == "bwrap" and bwrap is None:
        raise RuntimeUnavailable(f"the sandbox runtime cannot run here: bubblewrap is not installed (apt-get install bubblewrap); {HINT}")
    return None if options.backend == "native" else bwrap


# --- one sandbox -------------------------------------------------------------------------------------


class _Sandbox:
    """One sandbox: the launcher's process tree and a client on its env server's stdio."""

    def __init__(self, options: SandboxOptions, etc: Mapping[str, str], mounts: tuple[Mount, ...], staging: str,
                 bwrap: str | None, idmap: IdMap, command_root: bool = False, *, mapped: bool = True,
                 memory: memory_cgroup.Parent | None = None):
        """Start the launcher (in a memory cgroup of its own made in ``memory``, if given) and, unless
        ``mapped`` is false, map its user namespace; with ``mapped`` false the caller calls :meth:`map`
        (so several launchers can start side by side)."""
        self.options = options
        self.idmap = idmap
        self.call_timeout = options.call_timeout
        self._stderr = tempfile.TemporaryFile(prefix="litmus-sandbox-")
        self.process: subprocess.Popen[bytes] | None = None
        self.client: EnvClient | None = None
        self.info: dict[str, Any] = {}
        self.tainted = False  # ran a tool that may leave state outside the world root: never reuse
        self.worlds = 0  # worlds hosted so far
        self._server_pid: int | None = None  # found when first asked for
        self.command_root = command_root
        self._handshake: tuple[int, int] | None = None  # (ready_r, go_w) until the user namespace is mapped
        self._mapping = threading.RLock()  # a prepared sandbox is mapped by a thread while the caller works
        self._memory_parent = memory
        self.memory_group: memory_cgroup.Group | None = None
        self._start(etc, mounts, staging, bwrap)
        if mapped:
            self.map()

    def _start(self, etc: Mapping[str, str], mounts: tuple[Mount, ...], staging: str, bwrap: str | None) -> None:
        data: dict[str, int] = {}
        ready_r, ready_w = os.pipe()
        go_r, go_w = os.pipe()
        try:
            for path, content in etc.items():
                fd = os.memfd_create(path.rsplit("/", 1)[-1], 0)
                os.write(fd, content.encode())
                os.lseek(fd, 0, os.SEEK_SET)
                data[path] = fd
            sources, ops = root_plan(self.options, data, mounts)
            executable, _ = _python()
            shared = self.idmap.shared_uid
            config = {
                "parent": os.getpid(), "ready": ready_w, "go": go_r, "staging": staging, "sources": sources,
                "ops": ops, "hostname": HOSTNAME, "bwrap": bwrap, "rlimits": self._rlimits(),
                "caps": server_capabilities(shared, self.command_root),
                "stage_as_host_root": self.idmap.staged_by_host_root, "setgroups": self.idmap.setgroups,
                "env": {"PATH": PATH, "PYTHONPATH": MOUNT_ROOT, "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8",
                        "HOME": "/"},
                "argv": [executable, *server_args(shared)],
            }
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", str(LAUNCHER), json.dumps(config)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr,
                pass_fds=(ready_w, go_r, *data.values()),
            )
        except BaseException:
            os.close(ready_r)
            os.close(go_w)
            raise
        finally:
            for fd in (ready_w, go_r, *data.values()):
                os.close(fd)
        self._handshake = (ready_r, go_w)
        if self._memory_parent is not None:  # before it is let go on: everything it starts stays in the cgroup
            try:
                self.memory_group = memory_cgroup.Group(self._memory_parent, self.options.world_memory)
                self.memory_group.add(self.process.pid)
            except OSError as exc:
                self.kill()
                raise RuntimeUnavailable(f"the sandbox runtime cannot run here: cannot bound a world's memory in "
                                         f"{self._memory_parent.path}: {exc.strerror or exc}; {HINT}") from None
        assert self.process.stdout is not None and self.process.stdin is not None
        self.client = EnvClient(self.process.stdout.fileno(), self.process.stdin.fileno(),
                                timeout=self.options.start_timeout)

    def map(self) -> None:
        """Map the launcher's user namespace and let it go on (once; a second caller waits for the first);
        raises :class:`RuntimeUnavailable`."""
        with self._mapping:
            if self._handshake is None:
                return
            try:
                self._map_user_namespace(*self._handshake)
            finally:
                self._close_handshake()

    def _close_handshake(self) -> None:
        with self._mapping:
            if self._handshake is not None:
                for fd in self._handshake:
                    os.close(fd)
                self._handshake = None

    def _rlimits(self) -> list[tuple[str, int]]:
        o = self.options
        return [("RLIMIT_AS", o.memory), ("RLIMIT_NPROC", o.processes), ("RLIMIT_CPU", o.cpu),
                ("RLIMIT_FSIZE", o.file_size), ("RLIMIT_CORE", 0)]

    def _map_user_namespace(self, ready_r: int, go_w: int) -> None:
        """Wait for the launcher's user namespace, map it (we hold CAP_SETUID here; it does not), release it."""
        assert self.process is not None
        ready, _, _ = select.select([ready_r], [], [], self.options.start_timeout)
        if not ready or os.read(ready_r, 1) != b"1":
            self.kill()
            failure = self.failure()
            if "CLONE_NEWUSER" in failure:
                failure += (" (user namespaces are off: a kernel setting such as user.max_user_namespaces, "
                            "kernel.unprivileged_userns_clone or kernel.apparmor_restrict_unprivileged_userns, "
                            "or a container's seccomp profile)")
            raise RuntimeUnavailable(f"the sandbox runtime cannot run here: {failure}; {HINT}")
        try:
            self.idmap.write(self.process.pid)
        except OSError as exc:
            self.kill()
            lines = ", ".join(f"{a} {b} {c}" for a, b, c in self.idmap.uid_lines)
            raise RuntimeUnavailable(f"the sandbox runtime cannot run here: cannot map ids ({lines}) into a user "
                                     f"namespace ({exc.strerror}); {HINT}") from None
        os.write(go_w, b"1")

    def connect(self) -> dict[str, Any]:
        """Say hello (within the start timeout) and switch the client to the per-call timeout."""
        assert self.client is not None
        self.map()
        try:
            self.info = self.client.hello()
        except EnvError as exc:
            self.kill()
            raise RuntimeUnavailable(f"the sandbox runtime cannot run here: {self.failure() or exc}; {HINT}") from None
        self.client.timeout = self.call_timeout
        return self.info

    def failure(self) -> str:
        """Why the sandbox died: the tail of its stderr, or its exit status."""
        tail = ""
        try:
            self._stderr.seek(0)
            tail = self._stderr.read()[-2000:].decode("utf-8", "replace").strip()
        except (OSError, ValueError):
            pass
        lines = [line for line in tail.splitlines() if line.strip()]
        if lines:
            return lines[-1]
        code = self.process.poll() if self.process else None
        return f"the sandbox exited with status {code}" if code is not None else "the sandbox did not start"

    def host_pids(self) -> list[int]:
        """Host pids of the sandbox's process tree (for diagnostics and tests)."""
        if self.process is None:
            return []
        tree, frontier = [], [self.process.pid]
        while frontier:
            pid = frontier.pop()
            tree.append(pid)
            try:
                with open(f"/proc/{pid}/task/{pid}/children") as handle:
                    frontier.extend(int(p) for p in handle.read().split())
            except OSError:
                pass
        return tree

    def server_cpu(self) -> float | None:
        """CPU seconds the env server has used, or None where its process cannot be read."""
        if self._server_pid is None:
            self._server_pid = self.server_pid()
        if self._server_pid is None:
            return None
        try:  # read at every world's close: bytes through os, not a text file object, cost half as much
            fd = os.open(f"/proc/{self._server_pid}/stat", os.O_RDONLY)
            try:
                fields = os.read(fd, 4096).rsplit(b")", 1)[1].split()
            finally:
                os.close(fd)
        except (OSError, IndexError):
            return None
        return (int(fields[11]) + int(fields[12])) / _CLOCK_TICKS  # utime + stime

    def server_pid(self) -> int | None:
        """The env server's host pid (for diagnostics and tests)."""
        for pid in self.host_pids():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as handle:
                    argv = handle.read().split(b"\0")
            except OSError:
                continue
            if [a.decode(errors="replace") for a in argv[1:4]] == list(SERVER_ARGS[:3]):
                return pid
        return None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def shutdown(self) -> None:
        """Ask the server to stop (briefly), then kill whatever is left, and drop its stderr. A server with
        replies still unread (a close, a warm-up) is killed at once: its stop would wait for them first."""
        if self.client is not None and not self.client.broken and not self.client.pending and self.alive():
            try:
                self.client.request("shutdown", timeout=1.0)
            except EnvError:
                pass
        self.kill()
        self._stderr.close()

    def kill(self) -> None:
        """SIGKILL the launcher (bwrap, or the native monitor) and the namespace's pid 1, whose death takes
        every process in the namespace with it. Returns once pid 1 is gone (the kernel lets pid 1 finish
        exiting only after every other process of its namespace has).

        Pid 1 is signalled itself, not only through its parent-death signal: the kernel clears that signal
        whenever the server changes its effective or filesystem ids, which it does to act as a principal."""
        if self.client is not None:
            self.client.broken = True
        process = self.process
        if process is not None:
            inner = _pidfd(self.host_pids()[1:2])  # while the launcher lives, nobody else can reap pid 1
            if process.poll() is None:
                try:
                    os.kill(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            process.wait()
            if inner is not None:
                try:
                    signal.pidfd_send_signal(inner, signal.SIGKILL)
                    select.select([inner], [], [], 5.0)  # readable once it has exited
                except OSError:  # gone already, or not ours to signal: its parent-death signal ends it
                    pass
                finally:
                    os.close(inner)
            for stream in (process.stdin, process.stdout):
                if stream is not None:
                    try:
                        stream.close()
                    except OSError:
                        pass
        self._close_handshake()  # once the launcher is gone: a mapping under way sees its end and gives up
        if self.memory_group is not None:
            self.memory_group.remove()
            self.memory_group = None


class SandboxWorld(PooledWorld):
    """A world in a sandbox; a call that times out or loses the server kills the sandbox at once."""

    @property
    def sandbox(self) -> _Sandbox:
        return self.host


# --- the runtime -------------------------------------------------------------------------------------

_PROBED: dict[tuple[Any, ...], str | None] = {}
_PROBE_LOCK = threading.Lock()


class SandboxRuntime(Runtime):
    """Each world in fresh Linux namespaces, its calls under the principals' own uids.

    Options (keyword): see :class:`SandboxOptions`. Raises :class:`RuntimeUnavailable` (one line naming
    the alternatives) where namespaces cannot be made: not Linux, user namespaces disabled (naming the
    kernel setting), the asked-for ``id_mapping`` impossible here, or no ``bwrap`` when
    ``backend="bwrap"``. :attr:`notice` says in one line when the principals share one uid.
    """

    name = "sandbox"

    def __init__(self, **options: Any):
        try:
            self.options = SandboxOptions(**options)
        except TypeError as exc:
            raise TypeError(f"sandbox runtime: {exc}") from None
        self._check_host()
        try:
            self.idmap = _idmap.plan(self.options.id_mapping, self.options.uid_base)
        except MappingUnavailable as exc:
            raise RuntimeUnavailable(f"the sandbox runtime cannot run here: {exc}; {HINT}") from None
        self._bwrap = _backend(self.options)
        self._memory, why = memory_cgroup.find()
        self._memory_notice = None
        if self._memory is not None:
            self._memory.reap()
        else:
            cap = min(self.options.memory, FALLBACK_MEMORY)
            self._memory_notice = (f"sandbox: {why}, so a world's processes are not bounded together "
                                   f"(world_memory {self.options.world_memory // MiB} MiB); each is held to "
                                   f"{cap // MiB} MiB of address space instead")
            self.options = dataclasses.replace(self.options, memory=cap)
        reap_dirs(STAGING_PREFIX, _remove_dir)  # a killed run's (it holds only mount points: empty here)
        self._staging = tempfile.mkdtemp(prefix=owned_prefix(STAGING_PREFIX))
        os.chmod(self._staging, 0o755)  # the namespace's root must traverse it (it holds only mount points)
        self._finalizer = weakref.finalize(self, _remove_dir, self._staging)
        self.pool: Pool[_Sandbox] = Pool(self._spawn, lambda sandbox: sandbox.shutdown(), idle=self.options.reuse,
                                         warm=self.options.warm, retire=self._worn_out,
                                         start_many=self._spawn_many, fits=self._fits)
        self._closed = False
        self._probe()

    def _worn_out(self, sandbox: _Sandbox) -> bool:
        """Whether a sandbox whose world closed should be retired before its server nears RLIMIT_CPU."""
        used = sandbox.server_cpu()
        if used is None:
            return sandbox.worlds >= WORLDS_PER_SANDBOX
        return used >= RETIRE_AT_CPU_SHARE * self.options.cpu

    def _check_host(self) -> None:
        reason = None
        if not sys.platform.startswith("linux"):
            reason = f"Linux namespaces are not available on {sys.platform}"
        elif not os.path.exists("/proc/self/ns/user"):
            reason = "this kernel has no user namespaces"
        else:
            reason = _idmap.userns_disabled()
        if reason:
            raise RuntimeUnavailable(f"the sandbox runtime cannot run here: {reason}; {HINT}")

    def _probe(self) -> None:
        """Start one empty sandbox once per process and configuration: namespaces may be disabled."""
        key = (self._bwrap, self.idmap, sys.executable)
        with _PROBE_LOCK:
            if key not in _PROBED:
                try:
                    sandbox = _Sandbox(self.options, etc_files({}), (), self._staging, self._bwrap, self.idmap,
                                       memory=self._memory)
                    try:
                        sandbox.connect()
                    finally:
                        sandbox.shutdown()
                    _PROBED[key] = None
                except RuntimeUnavailable as exc:
                    _PROBED[key] = str(exc)
            reason = _PROBED[key]
        if reason is not None:
            self.close()
            raise RuntimeUnavailable(reason)

    @property
    def backend(self) -> str:
        return "bwrap" if self._bwrap else "native"

    @property
    def id_mapping(self) -> str:
        """How ids are mapped here: ``host-range``, ``subordinate`` or ``single-uid``."""
        return self.idmap.mode

    @property
    def notice(self) -> str | None:
        """One line saying what this sandbox isolates less than the full mode, and how to get it; or None."""
        return "; ".join(note for note in (self.idmap.notice, self._memory_notice) if note) or None

    def _host_key(self, spec: Mapping[str, Any], plan: hosting.Hosting) -> tuple[str, Any, bool]:
        """What a sandbox for this world is made with (its ``/etc`` and its hosting key), and whether the
        world keeps its state in memory; raises :class:`WorldSpecError` for principals the sandbox cannot
        map or isolate."""
        principals = parse_principals(spec.get("principals"))
        for name, attrs in principals.items():
            for key in ("uid", "gid"):
                if not 0 <= int(attrs[key]) < UID_COUNT:
                    raise WorldSpecError(f"world.principals.{name}.{key}",
                                         f"the sandbox maps ids 0-{UID_COUNT - 1}; {attrs[key]} is outside")
        check_isolable(principals)
        # Worlds whose domains all keep their state in memory touch no file, /etc included: their sandboxes
        # list no principals there, so such worlds share sandboxes whatever their principals, and they may
        # run in any sandbox made with the same mounts (see _fits: a batch of a few task worlds then starts
        # a sandbox per worker, not one per task world and worker).
        listed = {} if plan.in_memory else principals
        return json.dumps(etc_files(listed, not self.idmap.shared_uid), sort_keys=True), plan.key(), plan.in_memory

    @staticmethod
    def _fits(want: Any, have: Any) -> bool:
        """Whether a sandbox made for key ``have`` may host a world of key ``want``: a world kept in memory
        reads nothing of the sandbox's ``/etc`` (whoever it lists), so one made with the same mounts serves."""
        return want[2] and want[1] == have[1]

    def prepare(self, specs: Iterable[Mapping[str, Any]], semantics: Semantics) -> None:
        """Start sandboxes, side by side, for the worlds about to be opened that have none waiting: their
        servers boot while the caller works. A spec the runtime would refuse is skipped here; opening it
        says why."""
        if self._closed:
            return
        worlds: dict[Any, tuple[Mapping[str, Any], hosting.Hosting]] = {}
        # a batch's chunk names the same few spec objects run after run: each is planned once
        for spec in {id(spec): spec for spec in specs}.values():
            try:
                plan = hosting.plan(spec, semantics, self.name)
                if plan.inside:
                    worlds.setdefault(self._host_key(spec, plan), (spec, plan))
            except (EnvError, ValueError, TypeError, KeyError):
                continue

        def warm(key: Any, sandbox: _Sandbox) -> _WarmUp:
            spec, plan = worlds[key]
            return self._warm_up(sandbox, spec, plan, semantics)

        self.pool.prepare(list(worlds), warm)

    def _warm_up(self, sandbox: _Sandbox, spec: Mapping[str, Any], plan: hosting.Hosting,
                 semantics: Semantics) -> _WarmUp:
        """Send a new sandbox hello and one of its worlds to build and drop: its server imports the world's
        domains while it boots, not when its first world is opened. These wait in the pipe until the server
        reads them; a sandbox whose server fails any of them hosts no world (as after a failed load)."""
        client = sandbox.client
        assert client is not None
        # the hello waits for the server to boot; the load may take as long as the world's own would
        loading = max(self.options.start_timeout, plan.call_timeout(self.options.call_timeout))
        return _WarmUp(sandbox, [client.send("hello", timeout=self.options.start_timeout),
                                 client.send("load", timeout=loading, spec=dict(spec), semantics=semantics,
                                             imports=list(plan.imports)),
                                 client.send("close", timeout=loading)])

    def open_world(self, spec: Mapping[str, Any], semantics: Semantics) -> WorldHandle:
        return self._begin(spec, semantics).result()

    def open_ahead(self, spec: Mapping[str, Any], semantics: Semantics) -> PendingWorld:
        """Send the world's load to its sandbox now; the server builds the world while the caller goes on."""
        try:
            return self._begin(spec, semantics)
        except Exception as exc:  # raised where open_world raises it: when the world is asked for
            return PendingWorld(functools.partial(_raise, exc))

    def _begin(self, spec: Mapping[str, Any], semantics: Semantics) -> PendingWorld:
        if self._closed:
            raise EnvError("the sandbox runtime is closed")
        plan = hosting.plan(spec, semantics, self.name)
        if not plan.inside:
            return PendingWorld(lambda: hosting.open_in_process(self.name, plan, spec, semantics))
        key = self._host_key(spec, plan)

        def send(sandbox: _Sandbox) -> Callable[[], Reply]:
            if not sandbox.info:  # a reused sandbox said hello when it was new
                sandbox.connect()
            client = sandbox.client
            assert client is not None
            with client.corked():
                loaded = client.send("load", spec=dict(spec), semantics=semantics, imports=list(plan.imports))
                # The replay's first question of a fresh world is its state: the server answers it straight
                # after the load, saving a round trip. It reads the world only; a load that failed fails it too.
                snapshot = client.send("snapshot")

            def confirm() -> Reply:
                loaded.result()
                return snapshot

            return confirm

        # a failed load ends its sandbox: the warm spare already serves the next world of this key
        return begin_on(self.pool, key, send, plan.call_timeout(self.options.call_timeout), plan.uncontained_tools,
                        SandboxWorld, keep_after_bad_load=False,
                        warm=lambda _key, spare: self._warm_up(spare, spec, plan, semantics))

    def _spawn(self, key: Any, mapped: bool = True) -> _Sandbox:
        etc, (mounts, command_root), _ = key
        return _Sandbox(self.options, json.loads(etc), mounts, self._staging, self._bwrap, self.idmap, command_root,
                        mapped=mapped, memory=self._memory)

    def _spawn_many(self, keys: list[Any]) -> list[_Sandbox | None]:
        """Sandboxes for these keys, their launchers started together and mapped by a thread as each is
        ready (a launcher takes tens of milliseconds), so the caller goes on at once; one that fails to
        start is None, one that fails to map is killed (the pool passes over a dead host)."""
        started: list[_Sandbox | None] = []
        for key in keys:
            try:
                started.append(self._spawn(key, mapped=False))
            except (EnvError, OSError):
                started.append(None)
        pending = [sandbox for sandbox in started if sandbox is not None]
        if pending:
            threading.Thread(target=_map_each, args=(pending,), name="litmus-sandbox-map", daemon=True).start()
        return started

    def close(self) -> None:
        self._closed = True
        for sandbox in self.pool.drain():
            sandbox.kill()
            sandbox._stderr.close()
        self._finalizer()


def server_capabilities(shared_uid: bool, command_root: bool) -> list[str]:
    """The capabilities the env server keeps in its namespace, and why each (see ``_launcher.CAPABILITIES``):
    every one it needs to act as each principal (none to switch uids where they share one), the two that
    make a command's root where a domain needs one, and CAP_SETPCAP to exec every command without any."""
    caps = set(SHARED_UID_CAPS if shared_uid else _launcher.CAPABILITIES) - set(COMMAND_ROOT_CAPS)
    return sorted(caps | (set(COMMAND_ROOT_CAPS) if command_root else set()))


def server_args(shared_uid: bool) -> tuple[str, ...]:
    """The env server's arguments: switching to each principal's uid, or sharing one uid."""
    return tuple("--shared-uid" if a == "--switch-uid" and shared_uid else a for a in SERVER_ARGS)


class _WarmUp:
    """A new sandbox's hello and the world it built and dropped, read when the sandbox is first taken:
    :meth:`result` raises the first one's error; once all have succeeded the sandbox has said its hello,
    so its first world does not say it again."""

    def __init__(self, sandbox: _Sandbox, replies: list[Reply]):
        self._sandbox = sandbox
        self._replies = replies

    def result(self) -> None:
        hello, *rest = self._replies
        info = checked_hello(hello.result())
        for reply in rest:
            reply.result()
        self._sandbox.map()  # already done (the server answered); closes the handshake if a thread has not yet
        self._sandbox.info = info
        assert self._sandbox.client is not None
        self._sandbox.client.timeout = self._sandbox.call_timeout


def _raise(exc: Exception) -> WorldHandle:
    raise exc


def _map_each(sandboxes: list[_Sandbox]) -> None:
    for sandbox in sandboxes:
        try:
            sandbox.map()  # a failure has killed it already
        except (EnvError, OSError):
            pass


def _pidfd(pids: list[int]) -> int | None:
    """A pidfd for the first of these processes (none if it has gone)."""
    try:
        return os.pidfd_open(pids[0]) if pids else None
    except OSError:
        return None


def _remove_dir(path: str) -> None:
    try:
        os.rmdir(path)  # it only ever holds mount points of private namespaces: empty on the host
    except OSError:
        pass


__all__ = ["SandboxOptions", "SandboxRuntime", "SandboxWorld", "etc_files", "root_plan", "server_args",
           "server_capabilities"]
