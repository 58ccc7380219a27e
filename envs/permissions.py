"""Owners and POSIX permission checks for a world whose principals all share one uid.

A sandbox that can map only the user's own uid into its user namespace (no subordinate ids, no
``newuidmap``) cannot give each principal a uid of its own, so the kernel cannot tell them apart. There
the files domain records who owns each entry (by inode, so a rename or a hard link keeps its owner) and
checks each call the way the kernel's ``generic_permission`` would: search permission on every directory
a lookup passes, read or write on the entry, write and search on the directory an entry is created in or
removed from, and the sticky bit. Modes are the real inodes' modes. Commands run by the shell domain are
not checked (they run as the one uid); entries they create belong to the world's first principal.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import Callable

R, W, X = 4, 2, 1

Ids = tuple[int, int]


class Owners:
    """Who owns each entry of one world's tree: recorded per inode, else the world's default owner."""

    def __init__(self, default: Ids):
        self.default = default
        self._by_inode: dict[tuple[int, int], Ids] = {}

    def of(self, st: os.stat_result) -> Ids:
        return self._by_inode.get((st.st_dev, st.st_ino), self.default)

    def give(self, host: str, ids: Ids) -> None:
        """Record ``ids`` as the owner of the entry at ``host`` (never following a final symlink)."""
        st = os.lstat(host)
        self._by_inode[(st.st_dev, st.st_ino)] = ids

    def uid_of(self, st: os.stat_result) -> int:
        return self.of(st)[0]


class Checker:
    """The kernel's permission decisions for one acting principal, over host paths of the world's tree."""

    def __init__(self, owners: Owners, ids: Ids):
        self.owners = owners
        self.ids = ids

    def allows(self, st: os.stat_result, want: int) -> bool:
        uid, gid = self.ids
        if uid == 0:
            return True
        owner, group = self.owners.of(st)
        mode = stat.S_IMODE(st.st_mode)
        bits = mode >> 6 if uid == owner else mode >> 3 if gid == group else mode
        return bits & want == want

    def require(self, host: str, want: int, world: str) -> None:
        """Raise ``EACCES`` for ``world`` unless the principal has ``want`` on the entry at ``host``."""
        if not self.allows(os.stat(host, follow_symlinks=False), want):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), world)

    def searcher(self, to_host: Callable[[str], str], path: str) -> Callable[[str], None]:
        """A lookup hook: search permission on each directory a lookup of ``path`` passes through."""

        def search(directory: str) -> None:
            if not self.allows(os.stat(to_host(directory), follow_symlinks=False), X):
                raise OSError(errno.EACCES, os.strerror(errno.EACCES), path)

        return search

    def may_change_entry_of(self, parent_host: str, entry_host: str | None, world: str) -> None:
        """Creating or removing an entry: write and search on its directory, and the sticky bit's rule
        (only the entry's or the directory's owner may remove or replace an entry of a sticky directory)."""
        parent = os.stat(parent_host, follow_symlinks=False)
        if not self.allows(parent, W | X):
            raise OSError(errno.EACCES, os.strerror(errno.EACCES), world)
        if entry_host is None or not parent.st_mode & stat.S_ISVTX or self.ids[0] == 0:
            return
        entry = os.stat(entry_host, follow_symlinks=False)
        if self.ids[0] not in (self.owners.of(entry)[0], self.owners.of(parent)[0]):
            raise OSError(errno.EPERM, os.strerror(errno.EPERM), world)


__all__ = ["Checker", "Owners"]
