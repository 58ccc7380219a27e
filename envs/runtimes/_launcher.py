"""The sandbox launcher: the one piece of the sandbox runtime that runs on the host with privilege.

It runs as its own short-lived interpreter (``python3 -I -S _launcher.py CONFIG_JSON``), started by
:mod:`.sandbox` (as root, or as an ordinary user), and ends by exec-ing the sandbox. It imports only the standard library and
nothing of this package, so it starts in milliseconds and owes nothing to the host's site-packages.

Steps, and why each is here:

1. Run as root: a private mount namespace, still as host root, where the read-only bind sources (the
   Python installation, this package, pyfakefs) are bound onto numbered directories of a staging tmpfs.
   Host root can read them wherever they live (``/root`` is 0700); the unprivileged uid the sandbox runs
   as could not. Run as an ordinary user, whose own uid becomes the namespace's root, this is done
   inside the namespace instead, after step 3.
2. A user namespace (with a mount namespace of its own, which copies the staged binds). Only a process
   with ``CAP_SETUID`` in the *parent* namespace (root, or the setuid ``newuidmap``) may map more than
   one uid, so the launcher tells the runtime it is ready and waits while the runtime writes
   ``uid_map``/``gid_map`` (see :mod:`._idmap`: inner root is never host root).
3. Become the namespace's root, set no-new-privs, die with the runtime, forbid nested user namespaces,
   and set the sandbox-wide rlimits.
4. Exec ``bwrap`` for the mount, pid, net, ipc and uts namespaces and the minimal root — or, where
   bubblewrap is not installed, build the same root with the kernel API (:func:`native`).
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import resource
import select
import signal
import socket
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND = 32, 1024, 2048, 4096
MS_REC, MS_PRIVATE, MS_RELATIME = 16384, 1 << 18, 1 << 21
MNT_DETACH = 2
PR_SET_PDEATHSIG, PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 1, 24, 38

EXIT_SETUP = 125  # the launcher failed before the sandbox ran; its reason is on stderr

# The capabilities the env server keeps in its namespace (all others are dropped, bounding set included).
CAPABILITIES = {
    "CAP_CHOWN": 0,  # lay out world files owned by their principals
    "CAP_DAC_OVERRIDE": 1,  # build, snapshot and tear down a world whatever modes its principals set
    "CAP_FOWNER": 3,  # chmod entries it chowned to a principal
    "CAP_KILL": 5,  # kill a command's processes, whoever they run as
    "CAP_SETGID": 6,  # setegid/setresgid to a principal per call
    "CAP_SETUID": 7,  # seteuid/setresuid to a principal per call
    "CAP_SETPCAP": 8,  # exec each command without capabilities: empty bounding set, securebits
    "CAP_SYS_CHROOT": 18,  # a command's root: chroot into the world laid out at its absolute paths
    "CAP_SYS_ADMIN": 21,  # a command's root: a mount namespace per command (over this namespace only)
}
# pivot_root has no glibc wrapper; the generic table (aarch64, riscv64, ...) numbers it 41.
SYS_PIVOT_ROOT = {"x86_64": 155, "i386": 217, "i686": 217, "ppc64le": 203, "ppc64": 203, "s390x": 217,
                  "armv7l": 218, "armv6l": 218}
DEVICES = ("null", "zero", "full", "random", "urandom", "tty")

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class SetupError(Exception):
    """A step of building the sandbox failed; the message names the step."""


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise SetupError(f"{what}: {os.strerror(code)}")
    return result


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda s: None if s is None else s.encode()  # noqa: E731
    _check(_libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)),
           f"mount {source or fstype} on {target}")


# --- the plan: what the sandbox's root holds, rendered for bwrap or built natively ------------------


def bwrap_argv(config: dict[str, Any]) -> list[str]:
    """The bwrap command line for a launcher config (see :mod:`.sandbox` for the config's keys).

    The env server is the namespace's pid 1 (``--as-pid-1``), not bwrap's reaper: a command cannot signal
    pid 1 (the kernel drops SIGKILL and SIGSTOP, and any signal it has no handler for, sent from inside)
    and, where every principal shares the server's uid, cannot trace it either (the server holds
    capabilities the command lacks), whereas bwrap's reaper holds none. The server reaps what its
    commands leave (it is their subreaper anyway), and the namespace ends when it exits."""
    argv = [config["bwrap"], "--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts",
            "--hostname", config["hostname"], "--die-with-parent", "--new-session", "--as-pid-1", "--cap-drop", "ALL"]
    for cap in config["caps"]:
        argv += ["--cap-add", cap]
    argv.append("--clearenv")
    for key, value in config["env"].items():
        argv += ["--setenv", key, value]
    for op in config["ops"]:
        kind = op[0]
        if kind == "dir":
            argv += ["--perms", f"{op[2]:o}", "--dir", op[1]]
        elif kind == "bind":
            argv += ["--ro-bind", f"{config['staging']}/{op[1]}", op[2]]
        elif kind == "symlink":
            argv += ["--symlink", op[1], op[2]]
        elif kind == "tmpfs":
            argv += ["--perms", f"{op[3]:o}", "--size", str(op[2]), "--tmpfs", op[1]]
        elif kind == "data":
            argv += ["--perms", f"{op[3]:o}", "--ro-bind-data", str(op[1]), op[2]]
        elif kind == "proc":
            argv += ["--proc", op[1]]
        elif kind == "dev":
            argv += ["--dev", op[1]]
        elif kind == "remount-ro":
            argv += ["--remount-ro", op[1]]
        else:
            raise SetupError(f"unknown plan operation {kind!r}")
    return [*argv, "--chdir", "/", "--", *config["argv"]]


def _locked_flags(path: str) -> int:
    """The per-mount flags a read-only remount must keep (the kernel refuses to clear locked ones)."""
    flags = os.statvfs(path).f_flag
    table = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
             (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME))
    return sum(ms for st, ms in table if flags & st)


def _build_root(config: dict[str, Any], new: str) -> None:
    """Lay the plan out under ``new`` (a fresh tmpfs) with mount(2): what bwrap does, without bwrap."""
    staging = config["staging"]

    def at(path: str) -> str:
        return new + path

    for op in config["ops"]:
        kind = op[0]
        if kind == "dir":
            os.makedirs(at(op[1]), exist_ok=True)
            os.chmod(at(op[1]), op[2])
        elif kind == "bind":
            source, target = f"{staging}/{op[1]}", at(op[2])
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if os.path.isdir(source):
                os.makedirs(target, exist_ok=True)
            else:
                open(target, "a").close()
            _mount(source, target, None, MS_BIND | MS_REC)
            _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | _locked_flags(target))
        elif kind == "symlink":
            os.makedirs(os.path.dirname(at(op[2])), exist_ok=True)
            os.symlink(op[1], at(op[2]))
        elif kind == "tmpfs":
            os.makedirs(at(op[1]), exist_ok=True)
            _mount("tmpfs", at(op[1]), "tmpfs", MS_NOSUID | MS_NODEV, f"size={op[2]},mode={op[3]:o}")
        elif kind == "data":
            os.makedirs(os.path.dirname(at(op[2])), exist_ok=True)
            with os.fdopen(op[1], "rb") as source, open(at(op[2]), "wb") as target:
                target.write(source.read())
            os.chmod(at(op[2]), op[3])
        elif kind == "proc":
            os.makedirs(at(op[1]), exist_ok=True)
            _mount("proc", at(op[1]), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
        elif kind == "dev":
            _build_dev(at(op[1]))
        elif kind == "remount-ro":
            _mount(None, at(op[1]).rstrip("/") or "/", None,
                   MS_REMOUNT | MS_BIND | MS_RDONLY | _locked_flags(at(op[1])))
        else:
            raise SetupError(f"unknown plan operation {kind!r}")


def _build_dev(dev: str) -> None:
    os.makedirs(dev, exist_ok=True)
    _mount("tmpfs", dev, "tmpfs", MS_NOSUID, "mode=755,size=64k")
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            open(f"{dev}/{name}", "a").close()
            _mount(f"/dev/{name}", f"{dev}/{name}", None, MS_BIND)
    os.mkdir(f"{dev}/shm", 0o1777)
    os.chmod(f"{dev}/shm", 0o1777)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1"),
                         ("stderr", "/proc/self/fd/2")):
        os.symlink(target, f"{dev}/{name}")


def _pivot(new: str) -> None:
    number = SYS_PIVOT_ROOT.get(platform.machine(), 41)
    old = f"{new}/.oldroot"  # made before the root went read-only
    _check(_libc.syscall(number, new.encode(), old.encode()), "pivot_root")
    os.chdir("/")
    _check(_libc.umount2(b"/.oldroot", MNT_DETACH), "umount the old root")  # its empty mount point stays


def _drop_bounding_set(keep: list[str]) -> None:
    kept = {CAPABILITIES[name] for name in keep}
    try:
        with open("/proc/sys/kernel/cap_last_cap") as handle:
            last = int(handle.read())
    except OSError:
        last = 40
    for cap in range(last + 1):
        if cap not in kept:
            _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap}")


def native(config: dict[str, Any]) -> None:
    """The namespaces and root bwrap would make, made with unshare(2), mount(2) and pivot_root(2).

    The launcher stays outside as the monitor (the runtime kills it; pid 1 inside dies with it, and with
    pid 1 the whole pid namespace). Pid 1 builds the root and becomes the server (see :func:`bwrap_argv`).
    """
    _check(_libc.unshare(CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS), "unshare")
    alive_r, alive_w = os.pipe()  # the monitor holds the write end: EOF means it is gone
    child = os.fork()
    if child:
        os.close(alive_r)
        _, status = os.waitpid(child, 0)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    try:
        os.close(alive_w)
        _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
        if select.select([alive_r], [], [], 0)[0]:  # the monitor died before the line above
            os._exit(EXIT_SETUP)
        os.close(alive_r)
        socket.sethostname(config["hostname"])
        new = f"{config['staging']}/.root"
        _mount("tmpfs", new, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
        os.mkdir(f"{new}/.oldroot", 0o700)
        _build_root(config, new)
        _pivot(new)
        _drop_bounding_set(config["caps"])
    except (OSError, SetupError) as exc:
        os.write(2, f"litmus sandbox: {exc}\n".encode())
        os._exit(EXIT_SETUP)
    os.setsid()
    os.execve(config["argv"][0], config["argv"], config["env"])


# --- the launcher proper ----------------------------------------------------------------------------


def _stage(config: dict[str, Any]) -> None:
    """Step 1: a private mount namespace, and the bind sources staged where the sandbox's uids read them."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    staging = config["staging"]
    _mount("tmpfs", staging, "tmpfs", MS_NOSUID | MS_NODEV, "mode=755,size=1m")
    os.mkdir(f"{staging}/.root", 0o755)  # where native() builds the root (the namespace's root cannot mkdir here)
    for index, source in enumerate(config["sources"]):
        target = f"{staging}/{index}"
        if os.path.isdir(source):
            os.mkdir(target, 0o755)
        else:
            open(target, "a").close()
        _mount(source, target, None, MS_BIND | MS_REC)


def _become_root_of_new_userns(config: dict[str, Any]) -> None:
    """Step 2 and 3: the user namespace, mapped by the runtime, and its root."""
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWNS), "unshare(CLONE_NEWUSER)")
    os.write(config["ready"], b"1")
    os.close(config["ready"])
    if os.read(config["go"], 1) != b"1":  # the runtime went away before mapping us
        os._exit(EXIT_SETUP)
    os.close(config["go"])
    os.setresgid(0, 0, 0)
    if config["setgroups"]:  # else denied: an ordinary user's single-uid map may not allow it
        os.setgroups([])
    os.setresuid(0, 0, 0)
    # The parent-death signal is cleared by the credential change above: set it now, then re-check.
    _check(_libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0), "prctl(PR_SET_PDEATHSIG)")
    if os.getppid() != config["parent"]:
        os._exit(EXIT_SETUP)
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")
    try:  # per user namespace since Linux 4.9: nothing inside may make a namespace of its own
        with open("/proc/sys/user/max_user_namespaces", "w") as handle:
            handle.write("0")
    except OSError:
        pass
    for name, value in config["rlimits"]:
        resource.setrlimit(getattr(resource, name), (value, value))


def _close_all_but(keep: set[int]) -> None:
    """Nothing of the runtime's but stdio and the data files may reach the sandbox."""
    start = 0
    for fd in sorted(keep):
        if start < fd:  # closerange(n, n) would close everything: CPython passes n - 1 to close_range(2)
            os.closerange(start, fd)
        os.set_inheritable(fd, True)
        start = fd + 1
    os.closerange(start, max(start + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[0]))


def main(argv: list[str]) -> None:
    config = json.loads(argv[1])
    try:
        if config["stage_as_host_root"]:
            _stage(config)
        _become_root_of_new_userns(config)
        if not config["stage_as_host_root"]:
            _stage(config)
        _close_all_but({0, 1, 2, *(op[1] for op in config["ops"] if op[0] == "data")})
        if config["bwrap"]:
            argv_ = bwrap_argv(config)
            os.execv(argv_[0], argv_)
        native(config)
    except (OSError, SetupError) as exc:
        os.write(2, f"litmus sandbox: {exc}\n".encode())
        os._exit(EXIT_SETUP)


if __name__ == "__main__":
    main(sys.argv)
