"""A trajectory being mutated, and one mutation (an :class:`Edit`) as data.

A :class:`Draft` is a world and a trajectory as plain dicts; every call carries the key it had in the
original run (its *origin*), so edits address calls by origin however earlier edits moved them, and a
mutant's classes can be compared call for call with the original's. Edits are frozen values: a mutant is
the seed plus a tuple of edits, replayable, comparable and shrinkable by dropping edits.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from typing import Any, Iterator

from ..model import Trajectory

__all__ = ["Draft", "Edit", "NotApplicable", "ORIGIN"]

ORIGIN = "_origin"


class NotApplicable(Exception):
    """The edit's target is gone (an earlier edit dropped or changed it): this combination is not a mutant."""


@dataclass(frozen=True, order=True)
class Edit:
    """One mutation: which operator, on what (a call's origin key and argument, or the world), and to what.

    ``variant`` names the kind of change (``at``, ``just-below``, ``swap``, ``dropped``...); ``value`` is
    its parameter as JSON text (so edits hash and sort); ``note`` says it in words for the scenario's note.
    """

    operator: str
    target: str
    field: str
    variant: str
    value: str
    note: str

    @property
    def kind(self) -> str:
        return f"{self.operator}:{self.variant}"

    @property
    def where(self) -> str:
        return f"{self.target}.{self.field}" if self.field else self.target

    def param(self) -> Any:
        return json.loads(self.value)


def edit(operator: str, target: str, field: str, variant: str, value: Any, note: str) -> Edit:
    return Edit(operator, target, field, variant, json.dumps(value, sort_keys=True), note)


@dataclass
class Draft:
    """A world and a trajectory (plain data) with each call's origin key."""

    world: dict[str, Any]
    trajectory: dict[str, Any]

    @classmethod
    def of(cls, world: dict[str, Any], trajectory: Trajectory) -> "Draft":
        data = trajectory.model_dump(mode="json", exclude_none=True)
        for turn in data.get("turns", []):
            for call in turn.get("calls", []):
                call[ORIGIN] = call.pop("key")
        return cls(copy.deepcopy(world), data)

    def copy(self) -> "Draft":
        return Draft(copy.deepcopy(self.world), copy.deepcopy(self.trajectory))

    @property
    def turns(self) -> list[dict[str, Any]]:
        return self.trajectory.setdefault("turns", [])

    def calls(self) -> Iterator[tuple[int, int, dict[str, Any]]]:
        """(turn index, position, call) for every call, in order (0-based)."""
        for t, turn in enumerate(self.turns):
            for c, call in enumerate(turn.get("calls", [])):
                yield t, c, call

    def find(self, origin: str) -> tuple[int, int, dict[str, Any]]:
        for t, c, call in self.calls():
            if call.get(ORIGIN) == origin:
                return t, c, call
        raise NotApplicable(origin)

    def origins(self) -> list[str]:
        return [call.get(ORIGIN, "") for _, _, call in self.calls()]

    def to_trajectory(self) -> Trajectory:
        data = copy.deepcopy(self.trajectory)
        for turn in data.get("turns", []):
            for call in turn.get("calls", []):
                call.pop(ORIGIN, None)
        return Trajectory.model_validate(data)

    def trajectory_document(self) -> dict[str, Any]:
        """The trajectory as a scenario writes it inline: no keys, no origins, no empty defaults."""
        data = self.to_trajectory().model_dump(mode="json", exclude_none=True, exclude_defaults=True)
        data["id"], data["principal"] = self.trajectory["id"], self.trajectory["principal"]
        for turn in data.get("turns", []):
            turn.setdefault("calls", [])
            for call in turn["calls"]:
                call.pop("key", None)
        data.pop("format_version", None)
        return data
