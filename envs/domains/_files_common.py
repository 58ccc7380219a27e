"""What the files domain's two semantics share: the parsed layout, owners by principal, and the checks on
a call's path and content parameters."""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from typing import Any


from ..domain import Call, Declaration, Domain, WorldEnv
from ..errors import ServiceError
from ._file_layout import inside, owner_ids, parse_layout


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
        return owner_ids(first) if first else None

    def _ids_of(self, call: Call) -> tuple[int, int] | None:
        """The uid/gid a call's new entries belong to: the acting principal's, when the world knows it."""
        principal = self.env.principals.get(call.acting or call.principal)
        return owner_ids(principal) if principal else None

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
