"""A real directory tree as the files domain observes it: snapshots, entry values and the ``state`` view,
bounded in entries and never following a link or waiting on a special file."""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from collections import deque
from collections.abc import Mapping
from typing import Any, Callable, Collection, Iterator


from ..permissions import Owners
from ..values import bounded
from ._file_layout import digest


class TreeScanner:
    """The state of a real directory tree, as the files domain digests it: ``files:<world path>`` ->
    type, mode, owner and content hash or link target; and, for effects and ``state``, each entry's value
    (:func:`entry_value`). Iterative (a command can nest directories deeper than Python's stack), never
    following a link; content hashes and previews cached on (inode, size, mtime, ctime). Owners are the
    inodes' (as ``declared`` reads them back) unless ``owners`` records them."""

    def __init__(self, owners: Owners | None = None, declared: Callable[[int], int] | None = None) -> None:
        self.unobserved: str | None = None  # why the last walk saw only part of the tree
        self._content_cache: dict[tuple[int, ...], tuple[str, str]] = {}
        read = declared or (lambda uid: uid)
        self._uid = owners.uid_of if owners is not None else (lambda st: read(st.st_uid))

    def scan(self, root: str) -> dict[str, str]:
        state: dict[str, str] = {}
        for path, host, st in self._walk(root):
            if stat.S_ISLNK(st.st_mode):
                state[f"files:{path}"] = digest("symlink", st.st_mode, self._uid(st), "-> " + _readlink(host))
            elif stat.S_ISDIR(st.st_mode):
                state[f"files:{path}"] = digest("dir", st.st_mode, self._uid(st))
            elif stat.S_ISREG(st.st_mode):
                state[f"files:{path}"] = digest("file", st.st_mode, self._uid(st), f"sha256={self._content(host, st)[0]}")
            else:
                state[f"files:{path}"] = digest("other", st.st_mode, self._uid(st))
        return state

    def values(self, root: str, wanted: Collection[str] | None = None) -> dict[str, dict[str, Any]]:
        """``files:<world path>`` -> the entry's value, for every entry of the tree (or those ``wanted``)."""
        out: dict[str, dict[str, Any]] = {}
        for path, host, st in self._walk(root):
            if wanted is not None and f"files:{path}" not in wanted:
                continue
            if stat.S_ISLNK(st.st_mode):
                out[f"files:{path}"] = entry_value("symlink", st.st_mode, self._uid(st), target=_readlink(host))
            elif stat.S_ISREG(st.st_mode):
                sha, preview = self._content(host, st)
                out[f"files:{path}"] = entry_value("file", st.st_mode, self._uid(st), st.st_size, sha, preview)
            else:
                out[f"files:{path}"] = entry_value("dir" if stat.S_ISDIR(st.st_mode) else "other", st.st_mode, self._uid(st))
        return out

    def _walk(self, root: str) -> Iterator[tuple[str, str, os.stat_result]]:
        """Every entry under ``root``, breadth first (the world's own shallow entries before what a command
        nests under them), at most :data:`MAX_TREE_ENTRIES`; :attr:`unobserved` says why a walk stopped short."""
        self.unobserved = None
        skipped: list[str] = []
        queue = deque([(root, "")])
        seen = 0
        while queue:
            directory, world = queue.popleft()
            try:
                with os.scandir(directory) as scan:
                    entries = list(scan)
            except OSError as exc:
                if exc.errno == errno.ENAMETOOLONG:
                    skipped.append(world)
                continue  # unreadable to this process: its entries are not observable here
            for entry in entries:
                if seen >= MAX_TREE_ENTRIES:
                    self.unobserved = f"the tree holds more than {MAX_TREE_ENTRIES:,} entries; those past it were not walked"
                    return
                path = f"{world}/{entry.name}"
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError as exc:
                    if exc.errno == errno.ENAMETOOLONG:
                        skipped.append(path)
                    continue
                seen += 1
                yield path, entry.path, st
                if stat.S_ISDIR(st.st_mode):
                    queue.append((entry.path, path))
        if skipped:
            deepest = max(skipped, key=len)
            self.unobserved = (f"the tree nests past the kernel's {os.pathconf('/', 'PC_PATH_MAX'):,}-byte path limit "
                               f"({deepest.count('/')} levels under {deepest[:deepest.find('/', 1) + 1] or '/'}); "
                               f"what lies deeper was not walked")

    def _content(self, host: str, st: os.stat_result) -> tuple[str, str]:
        """The file's sha256 and the preview of its start."""
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
        cached = self._content_cache.get(key)
        if cached is None:
            try:  # never through a link, never blocking on a FIFO a command swapped in
                fd = os.open(host, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
            except OSError:
                return "unreadable", ""
            sha, head = hashlib.sha256(), b""
            try:
                while chunk := os.read(fd, 1 << 16):
                    if not head:
                        head = chunk[:PREVIEW_BYTES]
                    sha.update(chunk)
            finally:
                os.close(fd)
            cached = self._content_cache[key] = (sha.hexdigest(), _preview(head))
        return cached


def _regular_file(fd: int) -> None:
    """Refuse what read and write tools must not stream through: a directory (EISDIR), and a FIFO, socket
    or device, which could block the world's server or never end (EINVAL, as a tool that only reads and
    writes regular files answers)."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, "not a regular file (a FIFO, socket or device)")


PREVIEW_BYTES = 120
# A snapshot walks at most this many entries (a few seconds' work): a command that makes more cannot make
# the snapshot after it outlive the call's time limit. What lies past it is said, not silently missed.
MAX_TREE_ENTRIES = 50_000


def entry_value(
    kind: str, mode: int, uid: int, size: int | None = None, sha256: str | None = None, preview: str | None = None,
    target: str | None = None,
) -> dict[str, Any]:
    """What effects and ``state`` say of a filesystem entry: its kind, mode and owner's uid; a file's size,
    sha256 and the first :data:`PREVIEW_BYTES` bytes as text; a symlink's target. Never the file's bytes."""
    value: dict[str, Any] = {"kind": kind, "mode": f"{stat.S_IMODE(mode):04o}", "uid": uid}
    if kind == "file":
        value.update(size=size, sha256=sha256, preview=preview)
    if kind == "symlink":
        value["target"] = bounded(target)
    return value


def _preview(head: bytes) -> str:
    return head[:PREVIEW_BYTES].decode("utf-8", errors="replace")


def _readlink(host: str) -> str:
    try:
        return os.readlink(host)
    except OSError:
        return "?"


def _pick(values: Mapping[str, Any], resources: Collection[str]) -> dict[str, Any]:
    return {key: values[key] for key in resources if key in values}


MAX_VIEW_ENTRIES = 2048


def file_view(values: Mapping[str, Any]) -> dict[str, Any]:
    """The world's files for ``state``: world path -> entry value, at most :data:`MAX_VIEW_ENTRIES`."""
    return bounded({key.removeprefix("files:"): value for key, value in sorted(values.items())}, max_items=MAX_VIEW_ENTRIES)
