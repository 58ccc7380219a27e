"""What a trajectory replays against: a world, its compiled policy and the bindings of recorded tool names.

One holder for every command: a worlds file or a provider gives one per task key (:mod:`.worlds`), a
scenario gives its own (:attr:`.scenario.Scenario.task_world`), a near-miss seed carries one and replays
its drafts in copies of it; :func:`.analysis.replay_analysed` replays a trajectory in it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from .bindings import Bindings
from .policy import Policy

__all__ = ["TaskWorld"]


@dataclass(frozen=True)
class TaskWorld:
    """The world, compiled policy and bindings that the runs of one task key replay against.

    ``tools`` are the domain tools the world offers; ``bindings`` map further recorded tool names onto them.
    ``source`` says where it came from (a file, or a provider's name), for messages. ``others``, where a
    provider gives it, lists the worlds the run may equally have been made in (another version of its
    benchmark, when the run names none): a run whose replayed checks disagree with its recorded ones is
    replayed in them, and the first that reproduces every recorded check is the run's world.
    """

    key: str
    source: str
    world: dict[str, Any]
    policy: Policy
    tools: frozenset[str]
    bindings: Bindings = field(default_factory=Bindings)
    others: Callable[[], list["TaskWorld"]] | None = field(default=None, compare=False, repr=False)

    @property
    def known_tools(self) -> frozenset[str]:
        """Every recorded tool name this world can replay: its own tools and the bound ones."""
        return self.tools | self.bindings.tools
