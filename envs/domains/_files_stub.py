"""The files domain's stub semantics: a pyfakefs filesystem behind a harness's lexical workspace check, laid
out once per world spec and copied for each world (see :mod:`.files`)."""

from __future__ import annotations

import copy
import errno
import hashlib
import json
import os
import posixpath
import stat
import threading
import types
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, Collection, Iterator

from ..domain import Call, WorldEnv, register_domain, tool
from ..errors import WorldSpecError
from ._file_layout import DIR_MODE, FILE_MODE, Entry, digest, inside, normal
from ._file_tree import _pick, _preview, entry_value, file_view
from ._files_common import _busy, _content_param, _Files, _path_param

if TYPE_CHECKING:
    from pyfakefs.fake_file import FakeDirectory, FakeFile
    from pyfakefs.fake_filesystem import FakeFilesystem


@cache
def _fake() -> types.SimpleNamespace:
    """pyfakefs, imported when the first stub world is built: an isolated env server hosts real worlds
    only, and importing pyfakefs (doctest and unittest come with it) cost every server's start 45 ms."""
    from pyfakefs import helpers
    from pyfakefs.fake_file import FakeDirectory
    from pyfakefs.fake_filesystem import FakeFilesystem
    from pyfakefs.fake_open import FakeFileOpen
    from pyfakefs.fake_os import FakeOsModule

    return types.SimpleNamespace(helpers=helpers, FakeDirectory=FakeDirectory, FakeFilesystem=FakeFilesystem,
                                 FakeFileOpen=FakeFileOpen, FakeOsModule=FakeOsModule)


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
            self.previous = _fake().helpers.get_uid()
            _fake().helpers.set_uid(0)
        except BaseException:
            _FAKE_UID_LOCK.release()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            _fake().helpers.set_uid(self.previous)
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
        self._use(_fake().FakeFilesystem(path_separator="/"))
        self.fs.umask = 0o022
        with _fake_superuser():
            self._populate()
        if key is not None:
            _TEMPLATES.put(key, _copy_filesystem(self.fs))

    def _use(self, fs: FakeFilesystem) -> None:
        self.fs = fs
        self.os = _fake().FakeOsModule(self.fs)
        self.open = _fake().FakeFileOpen(self.fs)

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
            if isinstance(obj, _fake().FakeDirectory) and not stat.S_ISLNK(obj.st_mode):
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
            if isinstance(obj, _fake().FakeDirectory) and not stat.S_ISLNK(obj.st_mode):
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


def _fake_digest(obj: FakeFile) -> str:
    mode, uid = obj.st_mode, obj.st_uid
    if stat.S_ISLNK(mode):
        return digest("symlink", mode, uid, f"-> {obj.contents}")
    if stat.S_ISDIR(mode):
        return digest("dir", mode, uid)
    return digest("file", mode, uid, "sha256=" + hashlib.sha256(obj.byte_contents or b"").hexdigest())
