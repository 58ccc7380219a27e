"""The files domain's real semantics: a real directory tree resolved as if chrooted at the world's root
(see :mod:`.files`)."""

from __future__ import annotations

import errno
import os
import posixpath
import shutil
import stat
from contextlib import contextmanager, suppress
from collections.abc import Mapping
from typing import Any, Collection, Iterator


from ..domain import Call, WorldEnv, register_domain, tool
from ..errors import WorldSpecError
from ..permissions import R, W, X, Checker
from ..rootfs import RootResolution, ensure_within, host_path, private_root, remove_tree, trace_in_root
from ._file_layout import DIR_MODE, FILE_MODE, Entry, inside, normal
from ._file_tree import TreeScanner, _pick, _regular_file, file_view
from ._files_common import _busy, _content_param, _Files, _path_param


@register_domain
class FilesReal(_Files):
    """Real semantics: a host directory tree, every path resolved in root."""

    semantics = "real"

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        super().__init__(spec, env)
        owned = private_root("litmus-files-") if env.root is None else None
        self._owned_root: str | None = str(owned.parent) if owned is not None else None
        self.root = os.path.realpath(env.root if env.root is not None else owned)
        os.makedirs(self.root, exist_ok=True)
        self._scanner = TreeScanner(env.owners, env.declared_uid)
        # Only where each call runs under its principal's uid are entries chowned (to the ids the kernel
        # sees for them); elsewhere the process's own uid owns every entry and ``env.owners`` records who
        # the world says owns it, so no uid a scenario chooses ever owns a file on the host.
        self._chowns = env.switch_uid and os.geteuid() == 0
        default = self._default_owner() if self._chowns else None
        self._owner = env.kernel_ids(default) if default is not None else None
        if self._owner is not None:
            os.chown(self.root, *self._owner)
        self._populate()

    def close(self) -> None:
        if self._owned_root is not None:
            with suppress(OSError):
                remove_tree(self._owned_root)
            self._owned_root = None

    # setup

    def _populate(self) -> None:
        made: list[tuple[str, Entry]] = []
        for entry in self.layout.entries:
            try:
                made.append((self._create(entry), entry))
            except OSError as exc:
                raise WorldSpecError(entry.field, f"cannot create {entry.path}: {exc.strerror}") from None
        for path, field in ((self.workspace, "world.files.workspace"), (self.cwd, "world.files.cwd")):
            try:
                self._ensure_dir(path)
            except OSError as exc:
                raise WorldSpecError(field, f"cannot create directory {path}: {exc.strerror}") from None
        for host, entry in reversed(made):  # deepest first, so a restrictive parent mode comes last
            self._apply_attrs(host, entry)

    def _ensure_dir(self, world_dir: str) -> None:
        """``mkdir -p`` inside the root, following symlinks in root as any later lookup would."""
        parts = [p for p in world_dir.split("/") if p]
        for depth in range(1, len(parts) + 1):
            res = trace_in_root(self.root, "/" + "/".join(parts[:depth]))
            host = self._host(res.path)
            if not res.exists:
                os.mkdir(host, DIR_MODE)
                os.chmod(host, DIR_MODE)
                if self._owner is not None:
                    os.chown(host, *self._owner)
            elif not stat.S_ISDIR(os.stat(host, follow_symlinks=False).st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", res.path)

    def _create(self, entry: Entry) -> str:
        self._ensure_dir(posixpath.dirname(entry.path))
        res = trace_in_root(self.root, entry.path, follow_final=False)
        host = self._host(res.path)
        if res.exists:
            if entry.kind == "dir" and stat.S_ISDIR(os.lstat(host).st_mode):
                return host  # created earlier as a parent
            raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), entry.path)
        if entry.kind == "dir":
            os.mkdir(host, DIR_MODE)
            os.chmod(host, DIR_MODE)
        elif entry.kind == "symlink":
            os.symlink(entry.target, host)
        else:
            self._write(host, entry.content.encode("utf-8"), append=False, exclusive=True)
        return host

    def _apply_attrs(self, host: str, entry: Entry) -> None:
        if entry.mode is not None:
            os.chmod(host, entry.mode)  # never a symlink: the spec refuses mode on symlinks
        owner = self.env.kernel_ids(entry.owner) if entry.owner is not None else self._owner
        if owner is not None and self._chowns:
            os.chown(host, *owner, follow_symlinks=False)
        elif entry.owner is not None and self.env.owners is not None:
            self.env.owners.give(host, entry.owner)

    # resolution

    def _host(self, world_path: str) -> str:
        """The host path of a resolved world path, after checking it stays inside the root."""
        host = host_path(self.root, world_path)
        ensure_within(self.root, host)
        return host

    def _resolve(
        self, call: Call, param: str, value: Any, follow_final: bool, create: bool = False
    ) -> RootResolution:
        path = _path_param(param, value)
        checker = self._checker(call)
        search = checker.searcher(self._host, path) if checker is not None else None
        try:
            res = trace_in_root(self.root, path, cwd=self.cwd, follow_final=follow_final, create=create,
                                search=search)
        except OSError as exc:
            reason = errno.errorcode.get(exc.errno or 0, "an error")
            call.note(f"{param} {path} could not be resolved in the world root: {reason}")
            raise OSError(exc.errno, exc.strerror, path) from None  # the world's path, never the host's behind it
        call.resolve(**{param: res.path})
        call.read(*(f"files:{link}" for link, _ in res.links), f"files:{res.path}")
        self._explain(call, param, path, res)
        return res

    def _explain(self, call: Call, param: str, path: str, res: RootResolution) -> None:
        """Evidence for a resolution that differs from the lexical reading of the path."""
        where = self._where(res.path)
        if res.links:
            hops = ", ".join(f"{link} -> {target}" for link, target in res.links)
            noun = "symlink" if len(res.links) == 1 else "symlinks"
            call.note(f"{param} {path} resolved through {noun} {hops} to {res.path}{where}")
        if res.clamped:
            call.note(f"{param} {path}: '..' at the world root stayed at the root; resolved to {res.path}{where}")
        if where and not res.links and not res.clamped:
            call.note(f"{param} {path} resolved to {res.path}{where}")

    @contextmanager
    def _world_errors(self, *paths: str) -> Iterator[None]:
        """Report OS errors with world paths, never the host paths behind them."""
        try:
            yield
        except OSError as exc:
            filename2 = paths[1] if len(paths) > 1 else None
            raise OSError(exc.errno, exc.strerror, paths[0], None, filename2) from None

    def _give(self, host: str, call: Call) -> None:
        """New entries belong to the acting principal, as they would when the sandbox runs the call as it."""
        ids = self._ids_of(call)
        if ids is not None and self._chowns:
            os.chown(host, *self.env.kernel_ids(ids), follow_symlinks=False)
        elif ids is not None and self.env.owners is not None:
            self.env.owners.give(host, ids)

    # permissions, where the kernel cannot tell the principals apart

    def _checker(self, call: Call) -> Checker | None:
        return self.env.checker(call.acting or call.principal)

    def _may(self, call: Call, res: RootResolution, want: int) -> None:
        """``want`` (R, W) on an existing entry."""
        checker = self._checker(call)
        if checker is not None and res.exists:
            checker.require(self._host(res.path), want, res.path)

    def _may_change_entry(self, call: Call, res: RootResolution) -> None:
        """Create, remove or replace the entry ``res`` names, in its directory."""
        checker = self._checker(call)
        if checker is not None and res.path != "/":
            parent = self._host(posixpath.dirname(res.path))
            checker.may_change_entry_of(parent, self._host(res.path) if res.exists else None, res.path)

    @staticmethod
    def _write(host: str, data: bytes, append: bool, exclusive: bool = False) -> None:
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # a FIFO: ENXIO, never a wait
        flags |= os.O_EXCL if exclusive else (os.O_APPEND if append else os.O_TRUNC)
        fd = os.open(host, flags, FILE_MODE)
        try:
            _regular_file(fd)
            if exclusive:
                os.fchmod(fd, FILE_MODE)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
        finally:
            os.close(fd)

    # tools

    @tool
    def read_file(self, call: Call, path: str) -> str:
        res = self._resolve(call, "path", path, follow_final=True)
        with self._world_errors(res.path):
            self._may(call, res, R)
            # never blocking on a FIFO a command made: opened without waiting for a writer, then refused
            fd = os.open(self._host(res.path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
            try:
                _regular_file(fd)
                chunks = []
                while chunk := os.read(fd, 1 << 16):
                    chunks.append(chunk)
            finally:
                os.close(fd)
        return b"".join(chunks).decode("utf-8", errors="replace")

    @tool
    def write_file(self, call: Call, path: str, content: str, append: bool = False) -> dict[str, Any]:
        res = self._resolve(call, "path", path, follow_final=True, create=True)
        data = _content_param(content)
        with self._world_errors(res.path):
            if res.exists:
                if not os.path.isdir(self._host(res.path)):  # a directory is EISDIR before permissions
                    self._may(call, res, W)
            else:
                self._may_change_entry(call, res)
            host = self._host(res.path)
            self._write(host, data, append=bool(append))
            if not res.exists:
                self._give(host, call)
        return {"path": res.path, "bytes": len(data)}

    @tool
    def list_dir(self, call: Call, path: str = ".") -> list[str]:
        res = self._resolve(call, "path", path, follow_final=True)
        with self._world_errors(res.path):
            if os.path.isdir(self._host(res.path)):  # anything else is ENOTDIR before permissions
                self._may(call, res, R)
            fd = os.open(self._host(res.path), os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                return sorted(os.listdir(fd))
            finally:
                os.close(fd)

    @tool
    def delete_path(self, call: Call, path: str, recursive: bool = False) -> dict[str, int]:
        res = self._resolve(call, "path", path, follow_final=False)
        if res.path == "/":
            raise _busy(res.path)
        with self._world_errors(res.path):
            host = self._host(res.path)
            mode = os.lstat(host).st_mode
            if not stat.S_ISDIR(mode) or not recursive:
                self._may_change_entry(call, res)
                (os.rmdir if stat.S_ISDIR(mode) else os.unlink)(host)
                return {"deleted": 1}
            checker = self._checker(call)
            count = _count_tree(host, checker, res.path)
            if checker is None:
                shutil.rmtree(host)  # fd-based on Linux: never follows a symlink out of the tree
            else:
                _empty_tree_checked(host, res.path, checker)
                self._may_change_entry(call, res)
                os.rmdir(host)
        return {"deleted": count}

    @tool
    def make_symlink(self, call: Call, target: str, link_path: str) -> dict[str, str]:
        target = _path_param("target", target)
        res = self._resolve(call, "link_path", link_path, follow_final=False)
        with self._world_errors(res.path):
            if res.exists:
                raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST))
            self._may_change_entry(call, res)
            host = self._host(res.path)
            os.symlink(target, host)
            self._give(host, call)
        self._resolve_target(call, target, res.path)
        return {"link": res.path, "target": target}

    def _resolve_target(self, call: Call, target: str, link: str) -> None:
        """Where following the new link leads, in root; lexical if it does not resolve (yet)."""
        try:
            resolved = trace_in_root(self.root, link, follow_final=True).path
        except OSError as exc:
            resolved = normal(posixpath.join(posixpath.dirname(link), target))
            reason = errno.errorcode.get(exc.errno or 0, "an error")
            call.note(f"symlink {link} -> {target} does not resolve ({reason}); its target reads as {resolved}")
        call.resolve(target=resolved)
        if not inside(resolved, self.workspace):
            call.note(f"symlink {link} -> {target} leads to {resolved}{self._where(resolved)}")

    @tool
    def move_path(self, call: Call, src: str, dst: str) -> dict[str, str]:
        src_res = self._resolve(call, "src", src, follow_final=False)
        dst_res = self._resolve(call, "dst", dst, follow_final=False)
        for res in (src_res, dst_res):
            if res.path == "/":
                raise _busy(res.path)
        with self._world_errors(src_res.path, dst_res.path):
            if not src_res.exists:
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT))
            self._may_move(call, src_res, dst_res)
            os.rename(self._host(src_res.path), self._host(dst_res.path))
        return {"src": src_res.path, "dst": dst_res.path}

    def _may_move(self, call: Call, src: RootResolution, dst: RootResolution) -> None:
        """rename(2)'s checks: both directories' entries change; a directory moving to another parent
        rewrites its own ``..``, so it needs write permission on itself."""
        checker = self._checker(call)
        if checker is None:
            return
        if inside(dst.path, src.path) or inside(src.path, dst.path):
            return  # one inside the other: rename(2) fails (EINVAL, ENOTEMPTY) before checking permissions
        if dst.exists and os.lstat(self._host(dst.path)) == os.lstat(self._host(src.path)):
            return  # the same inode: rename(2) does nothing, and checks nothing
        self._may_change_entry(call, src)
        self._may_change_entry(call, dst)
        host = self._host(src.path)
        moving_dir = stat.S_ISDIR(os.lstat(host).st_mode)
        if dst.exists and moving_dir != stat.S_ISDIR(os.lstat(self._host(dst.path)).st_mode):
            return  # a directory onto a non-directory or back: ENOTDIR/EISDIR, before the check on the source itself
        if moving_dir and posixpath.dirname(src.path) != posixpath.dirname(dst.path):
            checker.require(host, W, src.path)

    # state

    def snapshot(self) -> dict[str, str]:
        return self._scanner.scan(self.root)

    def unobserved(self) -> str | None:
        return self._scanner.unobserved

    def values(self, resources: Collection[str]) -> dict[str, Any]:
        wanted = set(resources)
        return _pick(self._scanner.values(self.root, wanted), resources)

    def view(self) -> dict[str, Any]:
        return file_view(self._scanner.values(self.root))


def _empty_tree_checked(host_dir: str, world_dir: str, checker: Checker) -> None:
    """Empty a directory as ``shutil.rmtree`` does (entries as listed; a subdirectory emptied, then
    removed), refusing where the kernel would refuse the principal, so a refusal leaves what the
    kernel's walk would have left."""
    checker.require(host_dir, R, world_dir)
    with os.scandir(host_dir) as scan:
        entries = list(scan)
    for entry in entries:
        world = f"{world_dir}/{entry.name}"
        if entry.is_dir(follow_symlinks=False):
            checker.require(host_dir, X, world)
            _empty_tree_checked(entry.path, world, checker)
            checker.may_change_entry_of(host_dir, entry.path, world)
            os.rmdir(entry.path)
        else:
            checker.may_change_entry_of(host_dir, entry.path, world)
            os.unlink(entry.path)


def _count_tree(host_dir: str, checker: Checker | None = None, world_dir: str = "") -> int:
    """Entries in a directory tree, itself included, by lstat only (never a stat through a host symlink);
    with a ``checker``, refused where the principal could not list a directory of it."""
    count = 1
    if checker is not None:
        checker.require(host_dir, R, world_dir)
    with os.scandir(host_dir) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if checker is not None:
                    checker.require(host_dir, X, f"{world_dir}/{entry.name}")
                count += _count_tree(entry.path, checker, f"{world_dir}/{entry.name}")
            else:
                count += 1
    return count
