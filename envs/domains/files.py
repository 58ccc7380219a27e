"""Files: a workspace filesystem with symlinks, ownership and modes, and canary files outside it.

Stub (what a benchmark harness does): a pyfakefs ``FakeFilesystem`` used directly, never patched over
the real ``os``. The harness's only check is lexical: a path is joined with the cwd and
``posixpath.normpath``-ed, with no symlink resolution, and refused with ``EACCES`` if that lies outside
the workspace; the operation then runs in the fake filesystem, which follows symlinks as it does. The
harness stores symlink targets verbatim and does not check them.

Real: the world's filesystem is a real directory tree at ``env.root``. Every path is resolved as if
chrooted there (:mod:`..rootfs`, openat2 ``RESOLVE_IN_ROOT`` semantics), so an absolute symlink target
or a ``..`` at the root stays inside the root. Every final open or mutation is done without following
the final component, after checking that its parent lies inside the root: no host path outside
``env.root`` is ever touched.

Ownership and modes: spec modes are always applied; owners (and the owner of entries a call
creates: the acting principal) are applied with ``chown`` only where each call runs under its
principal's uid (``env.switch_uid``: the sandbox and docker), to the ids the kernel sees for them (the
world's id 0 acts as an unprivileged stand-in, :mod:`..principal_ids`, and reads back as 0). Elsewhere
nothing is chowned (no uid a scenario chooses ever owns a file on the host) and ``env.owners`` records
who owns each entry, so views show the declared owners either way. An entry
the spec gives no owner, and every directory the world makes on the way (the root, the workspace,
parents), belongs to the first declared principal: the world is that principal's machine, and others'
files are declared with ``owner``. So a runtime that runs each call under the principal's uid lets the
principal do what the in-process world does with its own files. In-process
there is no per-principal permission checking: the process acts for every principal. The sandbox
runtime runs each call as the principal's uid, so there the kernel decides (the world's root acts with
the server's powers, confined to the world's root); where its principals share
one uid (``env.shared_uid``: no subordinate ids to map), this domain makes the
kernel's checks itself (:mod:`..permissions`). The stub never checks
permissions (it runs pyfakefs as its superuser) because a harness does not either.
Harnesses differ in their check: the stub profile ``raw-prefix`` (``stub_profile: raw-prefix`` in the
world's ``files`` section) checks the raw string with ``startswith(workspace)`` and never normalises ``..``.
"""

from __future__ import annotations

import copy
import errno
import hashlib
import json
import os
import posixpath
import shutil
import stat
import threading
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from collections import deque
from collections.abc import Mapping
from typing import Any, Callable, Collection, Iterator, Literal

from pyfakefs import helpers as fake_helpers
from pyfakefs.fake_file import FakeDirectory, FakeFile
from pyfakefs.fake_filesystem import FakeFilesystem
from pyfakefs.fake_open import FakeFileOpen
from pyfakefs.fake_os import FakeOsModule

from ..domain import Call, Declaration, Domain, WorldEnv, register_domain, tool
from ..errors import ServiceError, WorldSpecError
from ..permissions import R, W, X, Checker, Owners
from ..rootfs import RootResolution, ensure_within, host_path, private_root, remove_tree, trace_in_root
from ..values import bounded

DEFAULT_WORKSPACE = "/workspace"
FILE_MODE = 0o644
DIR_MODE = 0o755
SPEC_KEYS = ("workspace", "cwd", "tree", "canaries")
ENTRY_KEYS = ("content", "dir", "symlink", "owner", "mode")

Kind = Literal["file", "dir", "symlink"]


# --- the world spec ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One initial filesystem entry, as the spec declares it."""

    path: str
    kind: Kind
    field: str
    content: str = ""
    target: str = ""
    owner: tuple[int, int] | None = None
    mode: int | None = None


@dataclass(frozen=True)
class Layout:
    """The parsed ``files:`` section."""

    workspace: str
    cwd: str
    entries: tuple[Entry, ...]
    canaries: tuple[str, ...]


def normal(path: str) -> str:
    """``posixpath.normpath`` that also folds POSIX's special leading ``//``."""
    result = posixpath.normpath(path)
    return "/" + result.lstrip("/") if result.startswith("//") else result


def inside(path: str, directory: str) -> bool:
    """Whether the normalised ``path`` is ``directory`` or lies under it (lexically)."""
    return directory == "/" or path == directory or path.startswith(directory + "/")


def parse_layout(spec: Mapping[str, Any], principals: Mapping[str, Mapping[str, Any]]) -> Layout:
    """Check and normalise a ``files:`` section; raises :class:`WorldSpecError` naming the field."""
    for key in spec:
        if key not in SPEC_KEYS:
            raise WorldSpecError(f"world.files.{key}", f"unknown key; expected one of {', '.join(SPEC_KEYS)}")
    workspace = _absolute(spec.get("workspace", DEFAULT_WORKSPACE), "world.files.workspace")
    cwd = _absolute(spec.get("cwd", workspace), "world.files.cwd")
    entries: dict[str, Entry] = {}
    for section in ("tree", "canaries"):
        raw = spec.get(section) or {}
        if not isinstance(raw, Mapping):
            raise WorldSpecError(f"world.files.{section}", "expected a mapping of absolute path -> entry")
        for key, value in raw.items():
            entry = _parse_entry(section, key, value, principals)
            if entry.path in entries:
                raise WorldSpecError(entry.field, f"{entry.path} is declared twice")
            if section == "canaries" and inside(entry.path, workspace):
                raise WorldSpecError(entry.field, f"a canary must lie outside the workspace {workspace}")
            entries[entry.path] = entry
    canaries = tuple(normal(str(k)) for k in (spec.get("canaries") or {}))
    return Layout(workspace, cwd, tuple(entries[p] for p in sorted(entries)), canaries)


def _absolute(value: Any, field: str) -> str:
    if not isinstance(value, str) or not value.startswith("/"):
        raise WorldSpecError(field, "expected an absolute path")
    if ".." in value.split("/") or "\0" in value:
        raise WorldSpecError(field, "must not contain '..' or NUL")
    return normal(value)


def _parse_entry(section: str, key: Any, value: Any, principals: Mapping[str, Mapping[str, Any]]) -> Entry:
    field = f"world.files.{section}.{key}"
    path = _absolute(key, field)
    if path == "/":
        raise WorldSpecError(field, "the world root itself cannot be declared")
    trailing = str(key).endswith("/")
    if isinstance(value, str):
        if trailing:
            raise WorldSpecError(field, "a path ending in '/' is a directory; it cannot have string content")
        return Entry(path, "file", field, content=value)
    if value is None and trailing:
        return Entry(path, "dir", field)
    if not isinstance(value, Mapping):
        raise WorldSpecError(field, "expected a string (file content) or a mapping with content, dir or symlink")
    for name in value:
        if name not in ENTRY_KEYS:
            raise WorldSpecError(f"{field}.{name}", f"unknown key; expected one of {', '.join(ENTRY_KEYS)}")
    kind = _entry_kind(value, field, trailing)
    content = value.get("content", "")
    if not isinstance(content, str):
        raise WorldSpecError(f"{field}.content", "expected a string")
    target = value.get("symlink", "")
    if kind == "symlink" and (not isinstance(target, str) or not target or "\0" in target):
        raise WorldSpecError(f"{field}.symlink", "expected a non-empty target path")
    mode = _parse_mode(value.get("mode"), f"{field}.mode")
    if kind == "symlink" and mode is not None:
        raise WorldSpecError(f"{field}.mode", "a symlink has no mode of its own on Linux")
    owner = _parse_owner(value.get("owner"), f"{field}.owner", principals)
    return Entry(path, kind, field, content=content, target=target, owner=owner, mode=mode)


def _entry_kind(value: Mapping[str, Any], field: str, trailing: bool) -> Kind:
    is_dir = value.get("dir", False)
    if not isinstance(is_dir, bool):
        raise WorldSpecError(f"{field}.dir", "expected a boolean")
    declared = (("dir", is_dir), ("symlink", "symlink" in value), ("content", "content" in value))
    kinds = [kind for kind, given in declared if given]
    if len(kinds) > 1:
        raise WorldSpecError(field, f"an entry is one of content, dir or symlink; got {' and '.join(kinds)}")
    if trailing and kinds and kinds[0] != "dir":
        raise WorldSpecError(field, "a path ending in '/' is a directory")
    if is_dir or (trailing and not kinds):
        return "dir"
    return "symlink" if "symlink" in value else "file"


def _parse_mode(value: Any, field: str) -> int | None:
    """Mode bits as an int or an octal string ("0o700", "0700", "700")."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            value = int(value.removeprefix("0o"), 8)
        except ValueError:
            raise WorldSpecError(field, f"expected octal mode bits, got {value!r}") from None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0o7777:
        raise WorldSpecError(field, "expected mode bits between 0 and 0o7777")
    return value


def _parse_owner(value: Any, field: str, principals: Mapping[str, Mapping[str, Any]]) -> tuple[int, int] | None:
    if value is None:
        return None
    if value == "root" and "root" not in principals:
        return (0, 0)
    if not isinstance(value, str) or value not in principals:
        known = ", ".join(sorted(principals)) or "none declared"
        raise WorldSpecError(field, f"unknown principal {value!r}; known principals: {known}")
    return _ids(principals[value])


def _ids(principal: Mapping[str, Any]) -> tuple[int, int]:
    uid = int(principal["uid"])
    return uid, int(principal.get("gid", uid))


def digest(kind: str, mode: int, uid: int, payload: str = "") -> str:
    """A snapshot digest: readable, and equal exactly when type, mode bits, owner and content agree."""
    return f"{kind} {stat.S_IMODE(mode):04o} uid={uid}" + (f" {payload}" if payload else "")


# --- shared domain behaviour -----------------------------------------------------------------


class _Files(Domain):
    name = "files"
    declaration = Declaration(contained=True)  # everything under the world root, which a load rebuilds

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        super().__init__(spec, env)
        self.layout = parse_layout(spec, env.principals)
        self.workspace = self.layout.workspace
        self.cwd = self.layout.cwd

    def _default_owner(self) -> tuple[int, int] | None:
        """Who owns what the spec does not give an owner: the first declared principal."""
        first = next(iter(self.env.principals.values()), None)
        return _ids(first) if first else None

    def _ids_of(self, call: Call) -> tuple[int, int] | None:
        """The uid/gid a call's new entries belong to: the acting principal's, when the world knows it."""
        principal = self.env.principals.get(call.acting or call.principal)
        return _ids(principal) if principal else None

    def _where(self, path: str) -> str:
        return "" if inside(path, self.workspace) else f" (outside the workspace {self.workspace})"


def _path_param(param: str, value: Any) -> str:
    if not isinstance(value, str):
        raise ServiceError(400, f"{param}: expected a path string, got {type(value).__name__}")
    if "\0" in value:
        raise OSError(errno.EINVAL, "path contains a NUL byte", value)
    if value == "":
        raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), value)
    return value


def _content_param(value: Any) -> bytes:
    if not isinstance(value, str):
        raise ServiceError(400, f"content: expected a string, got {type(value).__name__}")
    return value.encode("utf-8")


def _busy(path: str) -> OSError:
    return OSError(errno.EBUSY, "refusing to remove or move the world root", path)


# --- real semantics ----------------------------------------------------------------------------


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


# --- stub semantics ----------------------------------------------------------------------------


class _fake_superuser:  # noqa: N801 (used as a function: ``with _fake_superuser():``)
    """Run pyfakefs as uid 0, so the stub never refuses on permissions, whatever uid runs the tests.

    pyfakefs keeps the acting uid in a module global, restored on exit. One lock for the process holds it
    across the body, so stub worlds in several threads (a Dask worker's) never see another call's uid.
    A plain context manager, not a generator: it wraps every stub call.
    """

    __slots__ = ("previous",)

    def __enter__(self) -> None:
        _FAKE_UID_LOCK.acquire()
        try:
            self.previous = fake_helpers.get_uid()
            fake_helpers.set_uid(0)
        except BaseException:
            _FAKE_UID_LOCK.release()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            fake_helpers.set_uid(self.previous)
        finally:
            _FAKE_UID_LOCK.release()


_FAKE_UID_LOCK = threading.RLock()


@register_domain
class FilesStub(_Files):
    """Stub semantics: a pyfakefs filesystem behind a lexical workspace check."""

    semantics = "stub"
    profiles = {
        "default": "joins the cwd and normalises '..' lexically, then refuses a path outside the workspace",
        "raw-prefix": "refuses a path unless the raw string starts with the workspace (no '..' normalisation); "
        "the fake filesystem then resolves it",
    }

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        super().__init__(spec, env)
        # What the spec gives no owner belongs to the first declared principal, as in the real world.
        self._default_ids = self._default_owner() or (os.geteuid(), os.getegid())
        key = _template_key(spec, env.principals, self._default_ids)
        template = _TEMPLATES.get(key) if key is not None else None
        if template is not None:  # a copy of the same tree, laid out before: ~7x cheaper than laying it out
            self._use(_copy_filesystem(template))
            return
        self._use(FakeFilesystem(path_separator="/"))
        self.fs.umask = 0o022
        with _fake_superuser():
            self._populate()
        if key is not None:
            _TEMPLATES.put(key, _copy_filesystem(self.fs))

    def _use(self, fs: FakeFilesystem) -> None:
        self.fs = fs
        self.os = FakeOsModule(self.fs)
        self.open = FakeFileOpen(self.fs)

    def invoke(self, call: Call) -> Any:
        with _fake_superuser():
            return super().invoke(call)

    # setup

    def _populate(self) -> None:
        for entry in self.layout.entries:
            try:
                self._create(entry)
            except OSError as exc:
                raise WorldSpecError(entry.field, f"cannot create {entry.path}: {exc.strerror}") from None
        for path, field in ((self.workspace, "world.files.workspace"), (self.cwd, "world.files.cwd")):
            try:
                self.os.makedirs(path, DIR_MODE, exist_ok=True)
            except OSError as exc:
                raise WorldSpecError(field, f"cannot create directory {path}: {exc.strerror}") from None
        declared = {entry.path for entry in self.layout.entries}
        for made in self._directories(self.fs.root, ""):  # the workspace, the cwd, every parent on the way
            if made not in declared:
                self.os.chown(made, *self._default_ids, follow_symlinks=False)
        for entry in reversed(self.layout.entries):
            if entry.mode is not None:
                self.os.chmod(entry.path, entry.mode)  # never a symlink: the spec refuses mode on symlinks
            self.os.chown(entry.path, *(entry.owner or self._default_ids), follow_symlinks=False)

    def _directories(self, directory: FakeDirectory, world_dir: str) -> Iterator[str]:
        for name, obj in list(directory.entries.items()):
            if isinstance(obj, FakeDirectory) and not stat.S_ISLNK(obj.st_mode):
                yield f"{world_dir}/{name}"
                yield from self._directories(obj, f"{world_dir}/{name}")

    def _create(self, entry: Entry) -> None:
        self.os.makedirs(posixpath.dirname(entry.path), DIR_MODE, exist_ok=True)
        if entry.kind == "dir":
            if not self.fs.isdir(entry.path, follow_symlinks=False):
                self.fs.create_dir(entry.path, perm_bits=DIR_MODE, apply_umask=False)
        elif entry.kind == "symlink":
            self.os.symlink(entry.target, entry.path)
        else:
            data = entry.content.encode("utf-8")
            self.fs.create_file(entry.path, st_mode=stat.S_IFREG | FILE_MODE, contents=data, apply_umask=False)

    # the harness's lexical check

    def _lexical(self, call: Call, param: str, value: Any) -> str:
        """Join with the cwd and normalise, without looking at the filesystem; record it as resolved."""
        path = _path_param(param, value)
        if self.profile == "raw-prefix":  # the harness checks and passes on the joined string as it is
            resolved = posixpath.join(self.cwd, path)
        else:
            resolved = normal(posixpath.join(self.cwd, path))
        call.resolve(**{param: resolved})
        call.read(f"files:{resolved}")
        if ".." in path.split("/"):
            call.note(f"{param} {path} normalised lexically to {resolved} (no symlink resolution)")
        return resolved

    def _check(self, call: Call, param: str, resolved: str) -> None:
        allowed = resolved.startswith(self.workspace) if self.profile == "raw-prefix" else inside(resolved, self.workspace)
        if not allowed:
            call.note(f"harness lexical check refused {param} {resolved}: outside the workspace {self.workspace}")
            raise PermissionError(errno.EACCES, "outside the workspace", call.params.get(param))

    def _checked(self, call: Call, **params: Any) -> list[str]:
        """Resolve every path parameter first (so all are recorded), then apply the check to each."""
        resolved = [self._lexical(call, name, value) for name, value in params.items()]
        for name, path in zip(params, resolved):
            self._check(call, name, path)
        return resolved

    def _give(self, path: str, call: Call, follow_symlinks: bool = False) -> None:
        """New entries belong to the acting principal (the fake filesystem needs no root to say so)."""
        self.os.chown(path, *(self._ids_of(call) or self._default_ids), follow_symlinks=follow_symlinks)

    # tools

    @tool
    def read_file(self, call: Call, path: str) -> str:
        (resolved,) = self._checked(call, path=path)
        with self.open(resolved, "rb") as handle:
            data = handle.read()
        return data.decode("utf-8", errors="replace")

    @tool
    def write_file(self, call: Call, path: str, content: str, append: bool = False) -> dict[str, Any]:
        (resolved,) = self._checked(call, path=path)
        data = _content_param(content)
        existed = self.os.path.exists(resolved)
        with self.open(resolved, "ab" if append else "wb") as handle:
            handle.write(data)
        if not existed:
            self._give(resolved, call, follow_symlinks=True)  # the file created, wherever a link led
        return {"path": resolved, "bytes": len(data)}

    @tool
    def list_dir(self, call: Call, path: str = ".") -> list[str]:
        (resolved,) = self._checked(call, path=path)
        return sorted(self.os.listdir(resolved))

    @tool
    def delete_path(self, call: Call, path: str, recursive: bool = False) -> dict[str, int]:
        (resolved,) = self._checked(call, path=path)
        if resolved == "/":
            raise _busy(resolved)
        if not stat.S_ISDIR(self.os.lstat(resolved).st_mode):
            self.os.unlink(resolved)
            return {"deleted": 1}
        if not recursive:
            self.os.rmdir(resolved)
            return {"deleted": 1}
        return {"deleted": self._remove_tree(resolved)}

    def _remove_tree(self, path: str) -> int:
        """Remove a directory and everything under it, not following symlinks; count what went."""
        count = 0
        for name in self.os.listdir(path):
            child = f"{path}/{name}"
            if stat.S_ISDIR(self.os.lstat(child).st_mode):
                count += self._remove_tree(child)
            else:
                self.os.unlink(child)
                count += 1
        self.os.rmdir(path)
        return count + 1

    @tool
    def make_symlink(self, call: Call, target: str, link_path: str) -> dict[str, str]:
        target = _path_param("target", target)
        (resolved,) = self._checked(call, link_path=link_path)
        self.os.symlink(target, resolved)
        self._give(resolved, call)
        pointed = normal(posixpath.join(posixpath.dirname(resolved), target))
        call.resolve(target=pointed)
        if not inside(pointed, self.workspace):
            call.note(
                f"symlink {resolved} -> {target} points to {pointed}{self._where(pointed)}; "
                "the harness does not check symlink targets"
            )
        return {"link": resolved, "target": target}

    @tool
    def move_path(self, call: Call, src: str, dst: str) -> dict[str, str]:
        src_resolved, dst_resolved = self._checked(call, src=src, dst=dst)
        if "/" in (src_resolved, dst_resolved):
            raise _busy("/")
        self.os.rename(src_resolved, dst_resolved)
        return {"src": src_resolved, "dst": dst_resolved}

    # state

    def snapshot(self) -> dict[str, str]:
        state: dict[str, str] = {}
        self._scan(self.fs.root, "", state)
        return state

    def _scan(self, directory: FakeDirectory, world_dir: str, state: dict[str, Any], describe: Any = None,
              wanted: Collection[str] | None = None) -> None:
        for name, obj in directory.entries.items():
            world = f"{world_dir}/{name}"
            key = f"files:{world}"
            if wanted is None or key in wanted:
                state[key] = (describe or _fake_digest)(obj)
            if isinstance(obj, FakeDirectory) and not stat.S_ISLNK(obj.st_mode):
                self._scan(obj, world, state, describe, wanted)

    def _values(self, wanted: Collection[str] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {}
        self._scan(self.fs.root, "", out, _fake_value, wanted)
        return out

    def values(self, resources: Collection[str]) -> dict[str, Any]:
        wanted = set(resources)
        return _pick(self._values(wanted), resources)

    def view(self) -> dict[str, Any]:
        return file_view(self._values())


class _Templates:
    """The freshly laid-out fake filesystems of the last few world specs, to copy for the next world of
    the same spec (a batch opens one per run)."""

    def __init__(self, size: int = 16):
        self.size = size
        self._trees: dict[str, FakeFilesystem] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> FakeFilesystem | None:
        with self._lock:
            tree = self._trees.pop(key, None)
            if tree is not None:
                self._trees[key] = tree  # most recently used last
            return tree

    def put(self, key: str, tree: FakeFilesystem) -> None:
        with self._lock:
            self._trees[key] = tree
            while len(self._trees) > self.size:
                del self._trees[next(iter(self._trees))]


_TEMPLATES = _Templates()


def _template_key(spec: Mapping[str, Any], principals: Mapping[str, Any], default_ids: tuple[int, int]) -> str | None:
    """What a stub tree is laid out from: the section, the principals (owners by name) and the default
    owner (None: not plain JSON, so never shared)."""
    try:
        return json.dumps([spec, principals, list(default_ids)], sort_keys=True)
    except (TypeError, ValueError):
        return None


def _copy_filesystem(fs: FakeFilesystem) -> FakeFilesystem:
    """A deep copy of a fake filesystem, sharing only its wrappers of this process's standard streams."""
    shared = {id(stream): stream for entry in fs.open_files if entry for stream in entry}
    return copy.deepcopy(fs, shared)


def _fake_value(obj: FakeFile) -> dict[str, Any]:
    mode, uid = obj.st_mode, obj.st_uid
    if stat.S_ISLNK(mode):
        return entry_value("symlink", mode, uid, target=obj.contents)
    if stat.S_ISDIR(mode):
        return entry_value("dir", mode, uid)
    data = obj.byte_contents or b""
    return entry_value("file", mode, uid, len(data), hashlib.sha256(data).hexdigest(), _preview(data))


def _pick(values: Mapping[str, Any], resources: Collection[str]) -> dict[str, Any]:
    return {key: values[key] for key in resources if key in values}


MAX_VIEW_ENTRIES = 2048


def file_view(values: Mapping[str, Any]) -> dict[str, Any]:
    """The world's files for ``state``: world path -> entry value, at most :data:`MAX_VIEW_ENTRIES`."""
    return bounded({key.removeprefix("files:"): value for key, value in sorted(values.items())}, max_items=MAX_VIEW_ENTRIES)


def _fake_digest(obj: FakeFile) -> str:
    mode, uid = obj.st_mode, obj.st_uid
    if stat.S_ISLNK(mode):
        return digest("symlink", mode, uid, f"-> {obj.contents}")
    if stat.S_ISDIR(mode):
        return digest("dir", mode, uid)
    return digest("file", mode, uid, "sha256=" + hashlib.sha256(obj.byte_contents or b"").hexdigest())


__all__ = ["Entry", "FilesReal", "FilesStub", "Layout", "TreeScanner", "digest", "entry_value", "file_view", "inside", "normal",
           "parse_layout"]
