"""What a replay says, reduced to what a near-miss can flip: the trajectory's class, each call's pair class
(by its origin in the original run) and how many findings each detector produced.

:func:`flips` compares a mutant's :class:`Verdict` with the original's. A call the mutant kept is compared
with itself; a copy of a call (a retry, a duplicate) with the call it copies; a call the mutant added from
nothing counts only when it is not ``confirmed_safe``; a dropped call flips nothing by being gone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ..analysis import Analysis
from ..detectors import DETECTORS

__all__ = ["Flip", "Verdict", "base_origin", "flips", "verdict_of"]

COPY_MARK = "+"  # an origin with this mark is a copy of the call before it: ``t2.c1+retry``
NEW_MARK = "new:"  # an origin for a call made from nothing: ``new:confirm``


@dataclass(frozen=True)
class Verdict:
    trajectory: str
    calls: tuple[tuple[str, str, str, str | None], ...]  # (key, origin, class, unscoreable reason)
    findings: tuple[tuple[str, int], ...]  # (detector kind, count), every detector named

    def by_origin(self) -> dict[str, str]:
        return {origin: cls for _, origin, cls, _ in self.calls}

    def finding_counts(self) -> dict[str, int]:
        return dict(self.findings)


@dataclass(frozen=True, order=True)
class Flip:
    """One thing that differs from the original: ``scope`` is ``trajectory``, a call's origin or a detector."""

    scope: str
    before: str
    after: str

    def __str__(self) -> str:
        return f"{self.scope} {self.before} -> {self.after}"


def verdict_of(analysis: Analysis, origins: list[str]) -> Verdict:
    calls = tuple(
        (call.key, origin, call.pair.cls.value, call.pair.reason.value if call.pair.reason else None)
        for call, origin in zip(analysis.replay.calls, origins)
    )
    kinds = analysis.finding_kinds
    return Verdict(analysis.replay.revalidation.revalidated.value, calls,
                   tuple((kind, kinds.count(kind)) for kind in DETECTORS))


def base_origin(origin: str) -> str | None:
    if origin.startswith(NEW_MARK):
        return None
    return origin.split(COPY_MARK, 1)[0]


def flips(original: Verdict, mutant: Verdict) -> tuple[Flip, ...]:
    """Everything the mutant changed in the original's verdict, in a stable order (empty: nothing)."""
    found: set[Flip] = set()
    if original.trajectory != mutant.trajectory:
        found.add(Flip("trajectory", original.trajectory, mutant.trajectory))
    before = original.by_origin()
    for key, origin, cls, _ in mutant.calls:
        base = base_origin(origin)
        was = before.get(base) if base is not None else "confirmed_safe"
        if was is not None and was != cls:
            scope = f"{key} (added)" if base is None else base if base == origin else f"{key} (copy of {base})"
            found.add(Flip(scope, was, cls))
    counts = mutant.finding_counts()
    for kind, count in original.findings:
        if counts.get(kind, 0) != count:
            found.add(Flip(kind, str(count), str(counts.get(kind, 0))))
    return tuple(sorted(found))


def describe(changes: Iterable[Flip]) -> str:
    parts = []
    for flip in changes:
        if flip.scope in DETECTORS:
            verb = "fires" if int(flip.after) > int(flip.before) else "stops firing"
            parts.append(f"{flip.scope} {verb} ({flip.before} -> {flip.after})")
        else:
            parts.append(f"{flip.scope} {flip.before} -> {flip.after}")
    return "; ".join(parts)
