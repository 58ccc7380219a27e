"""The ``inprocess`` runtime: worlds in this process, for stub semantics, tests and in-memory domains."""

from __future__ import annotations

from typing import Any, Mapping

from .domain import Semantics
from .interface import Runtime, WorldHandle
from .world import World


class InProcessWorld(WorldHandle):
    def __init__(self, world: World):
        self.world = world

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return self.world.call(request)

    def snapshot(self) -> dict[str, str]:
        return self.world.snapshot()

    def report(self) -> dict[str, Any]:
        return self.world.report()

    def close(self) -> None:
        self.world.close()


class InProcessRuntime(Runtime):
    """Worlds in this process: for stub semantics and tests. Real file semantics stay inside the world's
    root by resolving every path as if chrooted there; nothing else is isolated."""

    name = "inprocess"

    def open_world(self, spec: Mapping[str, Any], semantics: Semantics) -> WorldHandle:
        return InProcessWorld(World(spec, semantics))


__all__ = ["InProcessRuntime", "InProcessWorld"]
