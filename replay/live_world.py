"""The world a live agent acts in, named as ``run`` and ``revalidate`` name worlds: a scenario file (its
world, policy and bindings, and its trajectory's principal and ambient session), a world file, or a worlds
directory and a task key (found most specific level first, then from world providers).

Nothing here opens a world; bad input is a :class:`.errors.InputError` naming the file and the field, raised
before anything is served.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .errors import ScenarioError
from .model import Trajectory
from .scenario import load_scenario
from .task_world import TaskWorld
from .worlds import NoWorld, WorldCatalog, load_world_file
from .yaml_io import read_yaml

__all__ = ["LiveWorld", "load_live_world"]


@dataclass(frozen=True)
class LiveWorld:
    """A task's world and who the agent acts as in it: the declared principal and the ambient session."""

    task_world: TaskWorld
    principal: str
    ambient_session: str | None = None


def load_live_world(path: str | Path, *, task: str | None = None, trajectory: str | None = None,
                    principal: str | None = None, ambient_session: str | None = None) -> LiveWorld:
    """The world ``path`` names (a scenario or world file, or a worlds directory with ``task``); a given
    ``principal`` or ``ambient_session`` replaces the one the file gives."""
    path = Path(path)
    file = str(path)
    if path.is_dir():
        if task is None:
            raise ScenarioError(file, "--task", "a worlds directory serves many tasks: name one with --task KEY")
        probe = Trajectory(id="live", task=task, principal=principal or "user", turns=[])
        try:
            world = WorldCatalog.load(path).find(probe)
        except NoWorld as exc:
            raise ScenarioError(file, "--task", str(exc)) from None
        return _acting(world, principal, ambient_session, file)
    if not path.is_file():
        raise ScenarioError(file, None, "no such scenario or world file, nor a worlds directory")
    data = read_yaml(path)
    if isinstance(data, dict) and ("trajectory" in data or "expect" in data):
        return _from_scenario(path, trajectory, principal, ambient_session)
    worlds = load_world_file(path, data)
    if task is None:
        return _acting(worlds[0], principal, ambient_session, file)
    for world in worlds:
        if world.key == task:
            return _acting(world, principal, ambient_session, file)
    served = ", ".join(repr(world.key) for world in worlds)
    raise ScenarioError(file, "--task", f"this file serves {served}, not {task!r}")


def _from_scenario(path: Path, trajectory: str | None, principal: str | None,
                   ambient_session: str | None) -> LiveWorld:
    scenario = load_scenario(path)
    chosen = scenario.trajectories[0]
    if trajectory is not None:
        matching = [t for t in scenario.trajectories if t.id == trajectory]
        if not matching:
            ids = ", ".join(repr(t.id) for t in scenario.trajectories)
            raise ScenarioError(str(path), "--trajectory", f"no trajectory {trajectory!r}; it holds {ids}")
        chosen = matching[0]
    return LiveWorld(scenario.task_world, principal or chosen.principal,
                     ambient_session if ambient_session is not None else chosen.ambient_session)


def _acting(world: TaskWorld, principal: str | None, ambient_session: str | None, file: str) -> LiveWorld:
    """Who acts in a world file's world: the principal given, else the first it declares; the ambient
    session given, else none (the world's own ``session`` is ambient in it already)."""
    if principal is None:
        declared = world.world.get("principals")
        names = list(declared) if isinstance(declared, (list, dict)) else []
        if not names:
            raise ScenarioError(file, "world.principals", "the world declares no principal: name one with --principal")
        principal = str(names[0])
    return LiveWorld(world, principal, ambient_session)
