"""Worlds directories: the world and policy of each benchmark task, for replaying runs that name their
task but carry no world of their own.

A worlds directory holds YAML files shaped like scenarios without a trajectory::

    name: transfer-gate            # the task this world serves (a run's ``task``)
    tasks: [transfer-gate-v2]      # optional further task names served by the same world
    world: {...}
    policy: {rules: [...]}

Loading validates each file as a scenario's world and policy are validated (one line naming the file
and field on error) and refuses two files claiming the same task.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .errors import ScenarioError
from .model import first_error
from .policy import Policy, PolicySpec
from .scenario import SCENARIO_SUFFIXES, read_yaml, validate_world


class WorldSpecFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format_version: int = 1
    name: str = Field(..., min_length=1)
    tasks: list[str] = Field(default_factory=list)
    description: str = ""
    world: dict[str, Any] = Field(default_factory=dict)
    policy: PolicySpec = Field(default_factory=PolicySpec)


@dataclass(frozen=True)
class TaskWorld:
    """The world and compiled policy a task's runs replay against."""

    task: str
    path: Path
    world: dict[str, Any]
    policy: Policy
    tools: frozenset[str]


def load_world_file(path: Path) -> list[TaskWorld]:
    file = str(path)
    try:
        spec = WorldSpecFile.model_validate(read_yaml(path))
    except ValidationError as exc:
        raise ScenarioError(file, *first_error(exc)) from None
    policy = Policy.compile(spec.policy, file)
    tools = frozenset(validate_world(spec.world, file))
    return [TaskWorld(task, path, spec.world, policy, tools) for task in (spec.name, *spec.tasks)]


def load_worlds(directory: str | Path) -> dict[str, TaskWorld]:
    """Every task's world in a directory (recursively); raises :class:`ScenarioError` on bad input."""
    root = Path(directory)
    if not root.is_dir():
        raise ScenarioError(str(root), None, "not a directory of world files")
    worlds: dict[str, TaskWorld] = {}
    for path in sorted(p for p in root.rglob("*") if p.suffix in SCENARIO_SUFFIXES and p.is_file()):
        for entry in load_world_file(path):
            if entry.task in worlds:
                raise ScenarioError(str(path), "name", f"task {entry.task!r} is already served by {worlds[entry.task].path}")
            worlds[entry.task] = entry
    return worlds
