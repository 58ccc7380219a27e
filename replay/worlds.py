"""Finding the world a recorded run replays against: worlds directories keyed by qualified task keys, and
world providers (bridges) that serve a whole benchmark themselves.

A run names its task with a **task key** qualified by benchmark and suite, ``tau-bench/retail/3``
or ``tau-bench/airline/0`` (a format that records no benchmark keeps its bare task name). A worlds
directory holds YAML files shaped like scenarios without a trajectory::

    name: tau-bench/airline     # the key this world serves: a task, a suite, or a whole benchmark
    tasks: [tau-bench/airline-2024]   # optional further keys served by the same world
    world: {...}
    policy: {rules: [...]}
    bindings: bindings.yaml     # or an inline list; see replay.bindings

A run is served by the most specific key that has a world: ``tau-bench/airline/task_3`` first,
then ``tau-bench/airline``, then ``tau-bench``. So one suite-level file serves every task of the suite,
a task-level file overrides it for one task, and two suites that reuse task names never share a world.
When the directory has none, a **world provider** registered for the key's benchmark (entry-point
group ``litmus_replay.worlds``) may serve the run; a run nobody serves says which keys were tried.

Loading validates each file as a scenario's world and policy are validated (one line naming the file
and field on error) and refuses two files claiming the same key.
"""

from __future__ import annotations

import inspect
import threading
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from litmus_replay.envs.plugins import PluginGroup

from . import corpora
from .bindings import BindingsField, resolve_bindings
from .errors import ReplayError, ScenarioError
from .model import Trajectory, first_error
from .policy import Policy, PolicySpec
from .scenario import SCENARIO_SUFFIXES, validate_world
from .task_world import TaskWorld
from .tools import world_tools
from .yaml_io import read_yaml

__all__ = [
    "NoWorld",
    "TaskWorld",
    "WorldCatalog",
    "WorldProvider",
    "key_levels",
    "load_world_file",
    "load_worlds",
    "provider_names",
]

PROVIDER_GROUP = "litmus_replay.worlds"


class NoWorld(ReplayError, LookupError):
    """No world serves a run; the message says which keys were tried, or why a provider could not."""


class WorldFileSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format_version: int = 1
    name: str = Field(..., min_length=1)
    tasks: list[str] = Field(default_factory=list)
    description: str = ""
    world: dict[str, Any] = Field(default_factory=dict)
    policy: PolicySpec = Field(default_factory=PolicySpec)
    bindings: BindingsField = Field(default_factory=list)


def key_levels(key: str) -> list[str]:
    """The levels of a task key, most specific first.

    >>> key_levels("tau-bench/airline/task_3")
    ['tau-bench/airline/task_3', 'tau-bench/airline', 'tau-bench']
    """
    parts = [part for part in key.split("/") if part]
    return ["/".join(parts[:depth]) for depth in range(len(parts), 0, -1)] or [key]


def load_world_file(path: Path, data: Any = None) -> list[TaskWorld]:
    """The task worlds one file serves (its ``name`` and every key in ``tasks``); ``data`` is the file's
    YAML when the caller has read it already."""
    file = str(path)
    try:
        spec = WorldFileSpec.model_validate(read_yaml(path) if data is None else data)
    except ValidationError as exc:
        raise ScenarioError(file, *first_error(exc)) from None
    policy = Policy.compile(spec.policy, file)
    tools = frozenset(validate_world(spec.world, file))
    bindings = resolve_bindings(spec.bindings, world_tools(spec.world), path)
    clash = sorted(bindings.tools & tools)
    if clash:
        raise ScenarioError(file, "bindings", f"{', '.join(clash)} already a tool of the world; a binding cannot shadow it")
    return [TaskWorld(key, file, spec.world, policy, tools, bindings) for key in (spec.name, *spec.tasks)]


def load_worlds(directory: str | Path) -> dict[str, TaskWorld]:
    """Every key's world in a directory (recursively); raises :class:`ScenarioError` on bad input."""
    root = Path(directory)
    if not root.is_dir():
        raise ScenarioError(str(root), None, "not a directory of world files")
    worlds: dict[str, TaskWorld] = {}
    for path in sorted(p for p in root.rglob("*") if p.suffix in SCENARIO_SUFFIXES and p.is_file()):
        data = read_yaml(path)
        if _is_bindings_file(data):
            continue
        for entry in load_world_file(path, data):
            if entry.key in worlds:
                raise ScenarioError(str(path), "name", f"task {entry.key!r} is already served by {worlds[entry.key].source}")
            worlds[entry.key] = entry
    return worlds


def _is_bindings_file(data: dict[str, Any]) -> bool:
    """A bindings file lives beside the worlds that include it: it has ``bindings`` and no ``name``."""
    return "bindings" in data and "name" not in data


@runtime_checkable
class WorldProvider(Protocol):
    """Serves the worlds of a whole benchmark (a bridge), so its runs need no worlds directory.

    ``name`` is the first level of the task keys it serves (``tau-bench``). ``world_for`` raises
    :class:`NoWorld` with the reason when it cannot serve a run (an unknown suite, task or version).
    A provider is made once per process and may keep what is costly to build. What else a bridge may
    offer (the benchmark's own checks, its versions, its settings) is on its class: see :mod:`.bridges`.
    """

    name: str

    def world_for(self, trajectory: Trajectory) -> TaskWorld: ...


_PROVIDERS: dict[str, Any] = {}  # a benchmark's name -> the factory of its provider
_PLUGINS = PluginGroup(PROVIDER_GROUP, "world provider", accept=_PROVIDERS.__setitem__)


def provider_names() -> list[str]:
    _PLUGINS.load()
    return sorted(set(_PROVIDERS) | {failure.name for failure in _PLUGINS.failures()})


def provider_factories() -> dict[str, Any]:
    """Every provider that loaded, by benchmark name: its class (or factory), for what a bridge offers
    beyond its worlds (:mod:`.bridges`)."""
    _PLUGINS.load()
    return dict(_PROVIDERS)


corpora.discover_with(provider_factories)  # a bridge's corpora register when its provider loads


class WorldCatalog:
    """Where runs find their worlds: a worlds directory (most specific key first), then providers."""

    def __init__(self, directory: dict[str, TaskWorld] | None = None, *, providers: bool = True,
                 benchmark_version: str | None = None):
        self.directory = directory or {}
        self.use_providers = providers
        # Every run's benchmark version (``revalidate --benchmark-version``), given to each provider that
        # takes one (a bridge with versions); a provider without versions is started without it.
        self.benchmark_version = benchmark_version
        self._instances: dict[str, Any] = {}
        self._lock = threading.Lock()

    @classmethod
    def load(cls, directory: str | Path | None, *, providers: bool = True,
             benchmark_version: str | None = None) -> "WorldCatalog":
        return cls(load_worlds(directory) if directory is not None else None, providers=providers,
                   benchmark_version=benchmark_version)

    def listed(self, trajectory: Trajectory) -> TaskWorld | None:
        """The directory's world for a run, or None (providers are not asked: finding theirs may cost
        as much as replaying)."""
        for level in key_levels(trajectory.task) if trajectory.task else ():
            world = self.directory.get(level)
            if world is not None:
                return world
        return None

    def find(self, trajectory: Trajectory) -> TaskWorld:
        """The world a run replays against; raises :class:`NoWorld` saying what was tried."""
        key = trajectory.task
        if not key:
            raise NoWorld("the run names no task, so no world can be found for it: "
                          "give it one with `revalidate --task KEY`")
        levels = key_levels(key)
        for level in levels:
            world = self.directory.get(level)
            if world is not None:
                return world
        tried = f"no world for task {key!r} (tried {', '.join(repr(level) for level in levels)})"
        provider = self._provider(levels[-1]) if self.use_providers else None
        if provider is None:
            raise NoWorld(tried)
        if isinstance(provider, str):
            raise NoWorld(f"{tried}; {provider}")
        return provider.world_for(trajectory)

    def _provider_options(self, factory: Any) -> dict[str, Any]:
        if not self.benchmark_version:
            return {}
        try:
            parameters = inspect.signature(factory).parameters
        except (TypeError, ValueError):
            return {}
        return {"benchmark_version": self.benchmark_version} if "benchmark_version" in parameters else {}

    def _provider(self, benchmark: str) -> Any:
        """The provider instance for a benchmark, a string saying why it failed, or None."""
        _PLUGINS.load()
        factory = _PROVIDERS.get(benchmark)
        if factory is None:
            return _PLUGINS.explain(benchmark)
        with self._lock:
            instance = self._instances.get(benchmark)
            if instance is None:
                try:
                    instance = self._instances[benchmark] = factory(**self._provider_options(factory))
                except Exception as exc:
                    return f"the world provider {benchmark!r} could not start: {type(exc).__name__}: {exc}"
            return instance
