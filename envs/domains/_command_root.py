"""The root a shell command runs in: the world's tree at its own absolute paths, the system read-only.

The files domain resolves a world path such as ``/workspace/x`` inside the world's root (a directory of
the sandbox or container, ``/world/root``). A shell command must see the same tree at the same paths, so a
recorded ``rm -rf /workspace/x`` acts on the world's ``/workspace/x``. Each command therefore gets a mount
namespace of its own: the forked child, still holding the server's capabilities in the runtime,
``unshare(CLONE_NEWNS)``\\ s, builds a fresh root on a small tmpfs and ``chroot``\\ s into it (after moving it
over ``/``) before it becomes the principal and sheds every capability (see :mod:`._command`). We chose a
namespace per command over laying the world out as the runtime's own root because the world's tree stays
exactly the directory the files domain, its snapshots and its resets already use (no mount points appear
in it), and a command's root holds nothing of the server (its code, its socket, the world's parent).

The root holds, in this order of precedence:

- the runtime's system directories (:data:`SYSTEM`: ``/usr``, ``/bin``, ``/sbin``, ``/lib*``, ``/etc``)
  as recursive read-only binds, symlinks as symlinks (``/bin -> usr/bin`` under usr-merge);
- the kernel's (:data:`KERNEL`: ``/proc``, ``/dev``) as the runtime has them, masks included (recursive
  binds); a world entry of that name is not shown to commands;
- ``/tmp``: the world's ``/tmp`` if the world has that directory, else the runtime's private ``/tmp``;
- every other top-level entry of the world, bound read-write (a directory or file) or copied (a symlink,
  whose target then resolves inside this root, as the files domain resolves it inside the world).

A world entry whose name is a system directory never replaces it. Where both are directories (a world's
``/etc/app.conf``), the command sees a read-only directory holding the system's entries and, beside them,
the world's (bound read-write, merged the same way one level down); where both have an entry of the same
name (a world's ``/etc/passwd`` or ``/usr/bin/bash``) the system's stays; anything else of the world's at a
system name (a file or a symlink named ``/usr``) is not shown. What is not shown is listed in
:attr:`RootPlan.hidden` and noted on the call. The root itself and merged directories are read-only, so a
command cannot create a new top-level entry (``EROFS``; on a real system a principal could not either) nor
remove a bound one (``EBUSY``).

The plan is computed by the server before it forks (:func:`plan`); the child only executes it
(:func:`enter`), opening each world source with ``O_NOFOLLOW`` so a symlink can never become a bind.
"""

from __future__ import annotations

import ctypes
import errno
import os
import stat
from dataclasses import dataclass, field

SYSTEM = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32", "etc")
KERNEL = ("proc", "dev")
SCRATCH = "tmp"
ROOT_SIZE = 4 * 1024 * 1024  # bytes of the root's tmpfs: mount points, symlinks and a few small copies
MAX_COPY = 256 * 1024  # the largest system file copied rather than bound (see _copy_unlinked)

CLONE_NEWNS = 0x00020000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_NOATIME, MS_NODIRATIME, MS_BIND, MS_MOVE = 32, 1024, 2048, 4096, 8192
MS_REC, MS_PRIVATE, MS_RELATIME = 16384, 1 << 18, 1 << 21
MNT_DETACH = 2

DIR, FILE, LINK, OTHER = "dir", "file", "link", "other"


@dataclass(frozen=True)
class RootPlan:
    """What :func:`enter` lays out: ``ops`` in order, each a tuple whose first item is its kind.

    ``("dir", path)`` and ``("file", path)`` make a mount point; ``("symlink", path, target)`` a symlink;
    ``("system", path, source)`` a recursive read-only bind; ``("kernel", path, source)`` a recursive bind
    as the runtime has it; ``("world", path, source, kind)`` a read-write bind of a world entry.
    ``hidden`` lists the world paths a command does not see (see the module docstring).
    """

    ops: tuple[tuple[str, ...], ...]
    hidden: tuple[str, ...] = field(default=())


def _kind(path: str) -> str | None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        return LINK
    if stat.S_ISDIR(mode):
        return DIR
    if stat.S_ISREG(mode):
        return FILE
    return OTHER


def _entries(directory: str, names: tuple[str, ...] | None = None) -> dict[str, str]:
    """Name -> kind of a directory's entries (only ``names``, if given)."""
    found: dict[str, str] = {}
    for name in names if names is not None else os.listdir(directory):
        kind = _kind(os.path.join(directory, name))
        if kind is not None:
            found[name] = kind
    return found


def plan(world_root: str, system_root: str = "/") -> RootPlan:
    """The command's root for the world under ``world_root``, with the system of ``system_root``."""
    ops: list[tuple[str, ...]] = []
    hidden: list[str] = []
    world = _entries(world_root)
    system = _entries(system_root, (*SYSTEM, *KERNEL, SCRATCH))
    for name in sorted(set(world) | set(system)):
        path, s, w = "/" + name, system.get(name), world.get(name)
        source_s, source_w = os.path.join(system_root, name), os.path.join(world_root, name)
        if name in KERNEL or (name == SCRATCH and w != DIR):
            if s is not None:
                _system(ops, s, source_s, path, bind="kernel")
            if w is not None:
                hidden.append(path)
        elif name == SCRATCH:
            _world(ops, hidden, w, source_w, path)
        else:
            _merge(ops, hidden, s, source_s, w, source_w, path)
    return RootPlan(tuple(ops), tuple(hidden))


def _merge(ops: list[tuple[str, ...]], hidden: list[str], s: str | None, source_s: str, w: str | None,
           source_w: str, path: str) -> None:
    if s is None:
        _world(ops, hidden, w, source_w, path)
        return
    if w is None:
        _system(ops, s, source_s, path)
        return
    if s != DIR or w != DIR:  # the system's entry stays; the world's is not shown
        _system(ops, s, source_s, path)
        hidden.append(path)
        return
    ops.append(("dir", path))
    system, world = _entries(source_s), _entries(source_w)
    for name in sorted(set(system) | set(world)):
        _merge(ops, hidden, system.get(name), os.path.join(source_s, name), world.get(name),
               os.path.join(source_w, name), f"{path}/{name}")


def _system(ops: list[tuple[str, ...]], kind: str, source: str, path: str, bind: str = "system") -> None:
    if kind == LINK:
        ops.append(("symlink", path, os.readlink(source)))
    elif kind in (DIR, FILE):
        ops.append(("dir" if kind == DIR else "file", path))
        ops.append((bind, path, source))
    # sockets, fifos and devices in a system directory are left out


def _world(ops: list[tuple[str, ...]], hidden: list[str], kind: str | None, source: str, path: str) -> None:
    if kind == LINK:
        ops.append(("symlink", path, os.readlink(source)))
    elif kind in (DIR, FILE):
        ops.append(("dir" if kind == DIR else "file", path))
        ops.append(("world", path, source, kind))
    elif kind is not None:
        hidden.append(path)


# --- in the forked child ----------------------------------------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    encode = lambda s: None if s is None else os.fsencode(s)  # noqa: E731
    _check(_libc.mount(encode(source), encode(target), encode(fstype), flags, encode(data)),
           f"mount {source or fstype} on {target}")


def _locked_flags(path: str) -> int:
    """The per-mount flags a remount must keep (the kernel refuses to clear locked ones)."""
    flags = os.statvfs(path).f_flag
    table = ((os.ST_NOSUID, MS_NOSUID), (os.ST_NODEV, MS_NODEV), (os.ST_NOEXEC, MS_NOEXEC),
             (os.ST_NOATIME, MS_NOATIME), (os.ST_NODIRATIME, MS_NODIRATIME), (os.ST_RELATIME, MS_RELATIME),
             (os.ST_RDONLY, MS_RDONLY))
    return sum(ms for st, ms in table if flags & st)


def enter(root: RootPlan, mountpoint: str) -> None:  # pragma: no cover  (runs in the forked child)
    """Make a mount namespace, lay ``root`` out on a tmpfs at ``mountpoint`` and make it this process's
    ``/``. Needs ``CAP_SYS_ADMIN`` and ``CAP_SYS_CHROOT`` in the runtime; raises ``OSError``."""
    _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)  # nothing done here reaches the server's namespace
    _mount("tmpfs", mountpoint, "tmpfs", MS_NOSUID | MS_NODEV, f"mode=755,size={ROOT_SIZE}")
    for op in root.ops:
        kind, at = op[0], mountpoint + op[1]
        if kind == "dir":
            os.mkdir(at, 0o755)
        elif kind == "file":
            os.close(os.open(at, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644))
        elif kind == "symlink":
            os.symlink(op[2], at)
        elif kind in ("system", "kernel"):
            try:  # recursive: masks and locked submounts come along
                _mount(op[2], at, None, MS_BIND | MS_REC)
            except FileNotFoundError:
                _copy_unlinked(op[2], at)
                continue
            if kind == "system":
                _mount(None, at, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | _locked_flags(at))
        elif kind == "world":
            _bind_world(op[2], at, op[3])
        else:
            raise OSError(errno.EINVAL, f"unknown root operation {kind!r}")
    _mount(None, mountpoint, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)
    os.chdir(mountpoint)
    _mount(".", "/", None, MS_MOVE)  # the runtime's root is now under ours, out of reach of any path
    _check(_libc.chroot(b"."), "chroot")
    os.chdir("/")


def own_proc() -> None:  # pragma: no cover  (runs in the forked child)
    """In the first process of a new pid namespace, inside the command's root: a ``/proc`` of that
    namespace instead of the runtime's, its sysctls read-only (as bubblewrap leaves the runtime's)."""
    if _libc.umount2(b"/proc", MNT_DETACH) != 0 and ctypes.get_errno() not in (errno.EINVAL, errno.ENOENT):
        _check(-1, "umount /proc")
    _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
    _mount("/proc/sys", "/proc/sys", None, MS_BIND | MS_REC)
    _mount(None, "/proc/sys", None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC)


def _copy_unlinked(source: str, at: str) -> None:  # pragma: no cover  (runs in the forked child)
    """A system file that is itself a bind of an unlinked file (bubblewrap's generated ``/etc`` files)
    cannot be bound again: the root gets a copy, read-only with the rest of the root."""
    with open(source, "rb") as handle:
        content = handle.read(MAX_COPY + 1)
    if len(content) > MAX_COPY:
        raise OSError(errno.EFBIG, f"{source} is a bind of an unlinked file larger than {MAX_COPY} bytes")
    with open(at, "wb") as handle:
        handle.write(content)
    os.chmod(at, stat.S_IMODE(os.stat(source).st_mode))


def _bind_world(source: str, at: str, kind: str) -> None:  # pragma: no cover  (runs in the forked child)
    """Bind a world entry read-write, never through a symlink: the entry is opened without following it."""
    fd = os.open(source, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISDIR(mode) if kind == DIR else stat.S_ISREG(mode)):
            raise OSError(errno.ESTALE, f"{source} changed while the command's root was being made")
        _mount(f"/proc/self/fd/{fd}", at, None, MS_BIND)
    finally:
        os.close(fd)
    _mount(None, at, None, MS_BIND | MS_REMOUNT | MS_NOSUID | MS_NODEV | (_locked_flags(at) & ~MS_RDONLY))


__all__ = ["KERNEL", "SCRATCH", "SYSTEM", "RootPlan", "enter", "own_proc", "plan"]
