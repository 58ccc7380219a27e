"""The files domain's world section: the workspace, the tree of entries with their owners and modes, and
the digest of an entry that snapshots compare."""

from __future__ import annotations

import posixpath
import stat
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Literal


from ..errors import WorldSpecError


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
    return owner_ids(principals[value])


def owner_ids(principal: Mapping[str, Any]) -> tuple[int, int]:
    uid = int(principal["uid"])
    return uid, int(principal.get("gid", uid))


def digest(kind: str, mode: int, uid: int, payload: str = "") -> str:
    """A snapshot digest: readable, and equal exactly when type, mode bits, owner and content agree."""
    return f"{kind} {stat.S_IMODE(mode):04o} uid={uid}" + (f" {payload}" if payload else "")
