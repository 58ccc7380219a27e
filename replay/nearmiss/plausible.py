"""What a model could have produced: the values a near-miss may put into a call.

A mutated trajectory is only worth adding to a benchmark if an agent could really have written it. Here a
call argument is **plausible** when it is built from what the agent saw before it acted:

- a value it saw whole — in a recorded or replayed output, an earlier argument of the run (the agent wrote
  it, so it knew it), or the world's visible facts (principals, facts, and the names of the things each
  domain holds: accounts, record ids and fields, profile owners, file paths);
- a string every word of which it saw (``acc-bob`` from ``acc-alice`` and ``bob``; ``owner=bob`` from a
  row's ``owner`` field and the principal ``bob``; ``/workspace/../home/alice`` or a path one step up from
  seen paths), or common shell idiom (``2>/dev/null``, ``|| true``) in a shell command;
- a number it saw, or one at, just below or just above a **boundary**: a number in a policy condition (a
  rule the agent was told) or in the world's settings it met (a confirmation threshold, a rate window, a
  balance or limit).

Booleans, ``None`` and an argument left out are always plausible; containers are plausible when every
value inside them is. :func:`is_plausible` is the check, and every operator's values pass it.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from collections.abc import Mapping
from typing import Any, Iterable, Iterator

__all__ = ["Boundary", "Seen", "is_plausible", "numbers_in", "words"]

_WORD = re.compile(r"[A-Za-z0-9_]+")
_NUMBER = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)(?![\w.])")
SHELL_IDIOM = "2>/dev/null >/dev/null || true ; echo done ok set -e"
# Sections of a world whose keys and field names are names an agent meets when it uses the domain.
_STRUCTURAL = {"principals", "session", "sessions", "facts"}


def words(value: str) -> list[str]:
    return _WORD.findall(value)


def numbers_in(text: str) -> list[float]:
    return [float(match) for match in _NUMBER.findall(text)]


@dataclass(frozen=True)
class Boundary:
    """A number a rule or the world draws a line at, and where it came from (a rule id or a world field).

    ``arguments`` names the arguments a rule's line is about (those its condition reads); None (a world's
    number) means any numeric argument may meet it."""

    value: float
    source: str
    arguments: frozenset[str] | None = None

    def applies_to(self, argument: str) -> bool:
        return self.arguments is None or argument.split(".")[-1] in self.arguments or argument in self.arguments


@dataclass
class Seen:
    """Everything a model could have seen in one run: whole values, words, numbers and boundaries."""

    values: set[str] = field(default_factory=set)
    words: set[str] = field(default_factory=set)
    numbers: set[float] = field(default_factory=set)
    boundaries: list[Boundary] = field(default_factory=list)
    principals: list[str] = field(default_factory=list)
    fields: dict[str, set[str]] = field(default_factory=dict)  # a field's name -> the values seen under it

    def add_fields(self, value: Any) -> None:
        """Remember which values were seen under which field name (a row's ``owner``, a record's ``status``)."""
        if isinstance(value, Mapping):
            for key, item in value.items():
                if isinstance(item, (str, int, float)) and not isinstance(item, bool):
                    self.fields.setdefault(str(key), set()).add(str(item))
                else:
                    self.add_fields(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                self.add_fields(item)

    def add(self, value: Any) -> None:
        """Take in any JSON value: every string, word and number inside it."""
        for leaf in _leaves(value):
            if isinstance(leaf, bool) or leaf is None:
                continue
            if isinstance(leaf, (int, float)):
                self.numbers.add(float(leaf))
                continue
            text = str(leaf)
            self.values.add(text)
            self.words.update(words(text))
            self.numbers.update(numbers_in(text))

    def add_boundary(self, value: float, source: str, arguments: frozenset[str] | None = None) -> None:
        if all(b.value != value or b.source != source for b in self.boundaries):
            self.boundaries.append(Boundary(float(value), source, arguments))

    def near_boundary(self, number: float) -> bool:
        return any(abs(number - b.value) <= 1 for b in self.boundaries)

    def number(self, number: float) -> bool:
        return float(number) in self.numbers or self.near_boundary(number)

    def string(self, text: str, shell: bool = False) -> bool:
        if text in self.values or not text:
            return True
        known = self.words | (set(words(SHELL_IDIOM)) if shell else set())
        return all(word in known or (word.isdigit() and self.number(float(word))) for word in words(text))


def is_plausible(value: Any, seen: Seen, shell: bool = False) -> bool:
    """Whether a model that saw ``seen`` could have produced ``value`` as an argument (see the module)."""
    if value is None or isinstance(value, bool):
        return True
    if isinstance(value, (int, float)):
        return seen.number(value)
    if isinstance(value, str):
        return seen.string(value, shell)
    if isinstance(value, Mapping):
        return all(seen.string(str(key)) and is_plausible(item, seen, shell) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return all(is_plausible(item, seen, shell) for item in value)
    return False


def world_visible(world: Mapping[str, Any], sections: bool = True) -> Iterator[Any]:
    """The world's facts an agent can see: principals, facts, and (``sections``: when they hold the world's
    state rather than a provider's coordinates) each domain's names (keys, ids, fields, paths) and the values
    of the rows, profiles and accounts it can query; never session tokens."""
    principals = world.get("principals")
    yield list(principals) if isinstance(principals, (list, Mapping)) else []
    yield world.get("facts") or {}
    if not sections:
        return
    for name, section in world.items():
        if name in _STRUCTURAL:
            continue
        yield from _names(section)


def _names(value: Any) -> Iterator[Any]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            if key == "session":
                continue
            yield from _names(item)
    elif isinstance(value, list):
        for item in value:
            yield from _names(item)
    else:
        yield value
        if isinstance(value, str) and value.startswith("/"):
            yield posixpath.dirname(value.rstrip("/"))


def world_numbers(world: Mapping[str, Any], path: str = "world") -> Iterator[tuple[float, str]]:
    """Every number in the world's settings and state, with the field it sits in."""
    if isinstance(world, Mapping):
        for key, item in world.items():
            yield from world_numbers(item, f"{path}.{key}")
    elif isinstance(world, list):
        for index, item in enumerate(world):
            yield from world_numbers(item, f"{path}[{index}]")
    elif isinstance(world, (int, float)) and not isinstance(world, bool):
        yield float(world), path


def _leaves(value: Any) -> Iterable[Any]:
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield str(key)
            yield from _leaves(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _leaves(item)
    else:
        yield value
