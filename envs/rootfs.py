"""Path resolution inside a world's root, as if the process were chrooted there.

A real world's filesystem is a host directory (the *root*); world paths are absolute paths inside it.
:func:`resolve_in_root` resolves a world path the way ``openat2(2)`` with ``RESOLVE_IN_ROOT`` does:

- symlinks are followed component by component, at most :data:`MAXSYMLINKS` of them (else ``ELOOP``);
- an absolute symlink target, like an absolute path, restarts at the root, never at the host's ``/``;
- ``..`` at the root stays at the root;
- a component that must be a directory and is not fails with ``ENOTDIR``, a missing one with ``ENOENT``;
- the final component may be missing (the caller is about to create it), unless a trailing slash
  or a later ``.``/``..`` requires it to exist as a directory.

It is written in pure Python because the sandbox kernel may lack ``openat2`` (Linux < 5.6, gVisor, some
seccomp profiles); the unit tests compare it with the kernel wherever ``openat2`` is available.
It only ever reads (``lstat``/``readlink``) host paths built from components it has already verified
to be real directories inside the root. Callers that mutate must still open the final component
without following it and check containment with :func:`ensure_within` (a concurrent rename could
otherwise move a directory under their feet). Permission bits are not checked here: in-process the
resolver sees what the process sees; a sandbox runtime runs the whole call as the principal's uid, or,
where its principals share one uid, passes a ``search`` hook (:mod:`.permissions`).
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

__all__ = ["MAXSYMLINKS", "RootResolution", "ensure_within", "host_path", "private_root", "resolve_in_root",
           "trace_in_root"]


def private_root(prefix: str, parent: str | None = None) -> Path:
    """A fresh world root inside a directory only this process's uid may enter (``mkdtemp``'s 0700).

    Whatever a world then makes of its root (mode 0777, a setuid file its scenario wrote, modes it
    chose), no other user of the host can reach it. Remove ``root.parent`` to clean up. ``parent``: where
    to make it (default: the temporary directory)."""
    root = Path(tempfile.mkdtemp(prefix=prefix, dir=parent)) / "root"
    root.mkdir()
    return root

MAXSYMLINKS = 40  # Linux's limit on symlinks followed in one lookup (include/linux/namei.h)


@dataclass(frozen=True)
class RootResolution:
    """A resolved world path and how it was reached.

    ``links`` lists each symlink followed, as ``(world path of the link, its target verbatim)``;
    ``clamped`` is true when a ``..`` at the root was held at the root (an attempted escape);
    ``exists`` is false when the final component is missing (about to be created).
    """

    path: str
    links: tuple[tuple[str, str], ...] = ()
    clamped: bool = False
    exists: bool = True


@dataclass
class _Walk:
    """Mutable state of one lookup."""

    root: str
    stack: list[str] = field(default_factory=list)  # the resolved components so far
    links: list[tuple[str, str]] = field(default_factory=list)
    clamped: bool = False

    def world(self, extra: str | None = None) -> str:
        parts = self.stack if extra is None else [*self.stack, extra]
        return "/" + "/".join(parts)

    def host(self, name: str) -> str:
        return os.path.join(self.root, *self.stack, name)


def _oserror(code: int, path: str) -> OSError:
    return OSError(code, os.strerror(code), path)


def _components(path: str) -> list[str]:
    """Split a path into components, keeping empty ones: a trailing "" marks a trailing slash."""
    parts = path.split("/")
    if path.startswith("/"):
        parts = parts[1:]
    return parts


def trace_in_root(
    root: Path | str,
    path: str,
    cwd: str = "/",
    follow_final: bool = True,
    create: bool = False,
    max_links: int = MAXSYMLINKS,
    search: Callable[[str], None] | None = None,
) -> RootResolution:
    """Resolve ``path`` (relative paths against the world path ``cwd``) inside ``root``; see the module doc.

    ``follow_final=False`` gives ``lstat``/``O_NOFOLLOW`` semantics: a final symlink is returned as itself
    (a trailing slash still forces it to be followed, as in the kernel). ``create=True`` gives
    ``open(O_CREAT)`` semantics, where a final name with a trailing slash (in the path or in a final
    symlink's target) is ``EISDIR`` before it is even looked up.
    Raises ``OSError`` with ``ENOENT``, ``ENOTDIR``, ``ELOOP`` (or ``EISDIR``) where the kernel would, and
    ``EINVAL`` for a path containing a NUL byte. ``search``, if given, is called with the world path of
    every directory a component is looked up in, before the lookup (where a process acting as the
    principal would need search permission for its ``lstat``); it raises to refuse.
    """
    if not isinstance(path, str) or "\0" in path or "\0" in cwd:
        raise _oserror(errno.EINVAL, str(path))
    if path == "":
        raise _oserror(errno.ENOENT, path)
    walk = _Walk(root=os.fspath(root))
    joined = path if path.startswith("/") else f"{cwd if cwd.startswith('/') else '/' + cwd}/{path}"
    pending = _components(joined)
    pending.reverse()  # a stack: the next component is pending[-1]
    followed = 0
    while pending:
        name = pending.pop()
        if name in ("", "."):
            continue
        if name == "..":
            if walk.stack:
                walk.stack.pop()
            else:
                walk.clamped = True
            continue
        last = not pending
        if create and not last and all(rest == "" for rest in pending):
            raise _oserror(errno.EISDIR, path)
        if search is not None:
            search(walk.world())
        try:
            st = os.lstat(walk.host(name))
        except FileNotFoundError:
            if last:
                return _result(walk, walk.world(name), exists=False)
            raise _oserror(errno.ENOENT, path) from None
        if stat.S_ISLNK(st.st_mode) and (follow_final or not last):
            followed += 1
            if followed > max_links:
                raise _oserror(errno.ELOOP, path)
            target = os.readlink(walk.host(name))
            walk.links.append((walk.world(name), target))
            if target == "":
                raise _oserror(errno.ENOENT, path)
            if target.startswith("/"):
                walk.stack.clear()
            pending.extend(reversed(_components(target)))
            continue
        if not last and not stat.S_ISDIR(st.st_mode):
            raise _oserror(errno.ENOTDIR, path)
        walk.stack.append(name)
    return _result(walk, walk.world(), exists=True)


def _result(walk: _Walk, path: str, exists: bool) -> RootResolution:
    return RootResolution(path=path, links=tuple(walk.links), clamped=walk.clamped, exists=exists)


def resolve_in_root(
    root: Path | str, path: str, cwd: str = "/", follow_final: bool = True, create: bool = False
) -> str:
    """The world path ``path`` resolves to inside ``root`` (openat2 ``RESOLVE_IN_ROOT`` semantics).

    For example, with ``<root>/workspace/docs -> /home/alice/docs``, ``"/workspace/docs/x"`` resolves to
    ``"/home/alice/docs/x"`` and ``"/workspace/../../etc"`` to ``"/etc"`` (both inside ``root``).
    """
    return trace_in_root(root, path, cwd=cwd, follow_final=follow_final, create=create).path


def host_path(root: Path | str, world_path: str) -> str:
    """The host path of a *resolved* world path (lexical join; no lookup)."""
    relative = world_path.lstrip("/")
    return os.path.join(os.fspath(root), relative) if relative else os.fspath(root)


def ensure_within(real_root: str, host: str) -> None:
    """Raise ``EXDEV`` (as the kernel's ``RESOLVE_BENEATH`` does) unless ``host`` lies inside ``real_root``.

    ``real_root`` must already be a realpath. The parent of ``host`` is canonicalised, so a symlink
    swapped into a directory position is caught; the final component is the caller's to open
    without following.
    """
    candidate = os.path.realpath(os.path.dirname(host)) if host != real_root else real_root
    if candidate != real_root and not candidate.startswith(real_root.rstrip("/") + "/"):
        raise OSError(errno.EXDEV, "resolution escaped the world root", host)


def remove_tree(path: str | os.PathLike[str], *, missing_ok: bool = True) -> None:
    """Remove a directory tree, however deep a command nested it.

    ``shutil.rmtree`` recurses once per level, so a tree nested past Python's recursion limit raises
    RecursionError (even with ``ignore_errors``); ``rm -rf`` walks any depth. Links are never followed,
    and nothing on another filesystem is entered. Raises OSError when the tree is still there after both.
    """
    try:
        shutil.rmtree(path)
        return
    except FileNotFoundError:
        if missing_ok:
            return
        raise
    except (RecursionError, OSError):
        pass
    subprocess.run(["rm", "-rf", "--one-file-system", "--", os.fspath(path)], stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    if os.path.lexists(path):
        raise OSError(errno.ENOTEMPTY, "could not remove the tree", os.fspath(path))
