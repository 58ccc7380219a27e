"""The search for near-misses of one seed: which mutants to try, which to keep, shrinking and dedupe.

1. **Try**: every single edit the operators propose (round-robin over operators, up to ``tries``), every
   pair when there are no more than ``tries`` of them, then combinations of two or three edits that
   hypothesis draws — a strategy picks an operator, then one of its edits — for ``tries`` more examples,
   seeded with ``seed`` so the same seed tries the same mutants.
2. **Keep** a mutant whose verdict differs from the original's (:func:`.verdict.flips`), or one that does
   not but sits on the boundary: one more edit, which alone would flip nothing, flips it (the edit and what
   it flips go in its note).
3. **Shrink** each flipping mutant to a minimal change: drop edits one at a time while the same things
   flip, until no single edit can go.
4. **Dedupe** by what changed (each edit's kind and place) and what it flips, and choose ``count`` of them,
   those that cover a pair class, a detector or an operator not yet covered first.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from itertools import combinations
from typing import Iterable

from hypothesis import HealthCheck, Phase, Verbosity, given, seed as hypothesis_seed, settings as Settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from pydantic import ValidationError

from litmus_replay.envs import WorldSpecError

from ..analysis import Analysis
from ..detectors import DETECTORS
from . import domain_operators  # noqa: F401  (registers the domain-aware operators)
from .draft import Draft, Edit, NotApplicable
from .operators import apply_edits, propose_all
from .plausible import Seen, is_plausible, world_visible
from .seed import Seed, SeedReplayer
from .verdict import Flip, Verdict, flips, verdict_of

__all__ = ["Mutant", "Search", "draft_is_plausible"]

DEFAULT_TRIES = 120
DEFAULT_COUNT = 8
BOUNDARY_PROBES = 8  # further edits tried on each single-edit mutant that flips nothing


@dataclass
class Mutant:
    """A kept mutant: its minimal edits, its replay and verdict, and what it flips (from the original, or,
    for a boundary mutant, what ``one_more`` would flip)."""

    edits: tuple[Edit, ...]
    draft: Draft
    analysis: Analysis
    verdict: Verdict
    flips: tuple[Flip, ...]
    one_more: Edit | None = None
    one_more_flips: tuple[Flip, ...] = ()

    @property
    def on_boundary(self) -> bool:
        return self.one_more is not None

    @property
    def dedupe_key(self) -> tuple:
        changed = frozenset((e.operator, e.where) for e in self.edits)
        if self.one_more is not None:  # A on the edge that B tips over is B on the edge that A tips over
            both = changed | {(self.one_more.operator, self.one_more.where)}
            return both, "boundary", self.one_more_flips
        return changed, self.flips

    @property
    def fingerprint(self) -> str:
        """The run itself: two edit sets that make the same world and trajectory are one mutant."""
        return json.dumps([self.draft.world, self.draft.trajectory_document()], sort_keys=True, default=str)

    def covers(self) -> set[tuple[str, str]]:
        """What this mutant adds to a suite: pair classes it flips to, detectors it fires, its operators."""
        out = {("operator", e.operator) for e in self.edits}
        out |= {("class", cls) for _, _, cls, _ in self.verdict.calls}
        out |= {("detector", kind) for kind, count in self.verdict.findings if count}
        out |= {("flip", f.after) for f in self.flips if f.scope not in DETECTORS}
        return out


@dataclass
class _Tried:
    draft: Draft
    analysis: Analysis
    verdict: Verdict
    flips: tuple[Flip, ...]


@dataclass
class Search:
    seed: Seed
    replayer: SeedReplayer
    tries: int = DEFAULT_TRIES
    random_seed: int = 0
    tried: dict[tuple[Edit, ...], _Tried | None] = field(default_factory=dict)
    implausible: int = 0  # edit sets refused for an argument no model could have produced
    replayed: int = 0  # edit sets that made a mutant and were replayed: the mutants tried

    def run(self, count: int = DEFAULT_COUNT) -> list[Mutant]:
        candidates = propose_all(self.seed)
        if not candidates:
            return []
        for change in candidates[: self.tries]:
            self.evaluate((change,))
        pairs = [pair for pair in combinations(candidates, 2) if pair[0].where != pair[1].where]
        if len(pairs) <= self.tries:  # few enough to try every pair, before hypothesis draws larger sets
            for pair in pairs:
                self.evaluate(pair)
        self._combinations(candidates)
        kept = self._keep(candidates)
        return choose(kept, count)

    def evaluate(self, edits: Iterable[Edit]) -> _Tried | None:
        """Replay the seed with ``edits`` (once per distinct set); None when they do not make a mutant."""
        key = tuple(sorted(set(edits)))
        if key in self.tried:
            return self.tried[key]
        result = None
        try:
            draft = apply_edits(self.seed, key)
            if not draft_is_plausible(self.seed.seen, draft, self.seed.world_is_state):
                self.implausible += 1
            elif any(True for _ in draft.calls()):
                self.replayed += 1
                analysis = self.replayer.analyse(self.seed, draft)
                if not any(call.harness_error for call in analysis.replay.calls):
                    verdict = verdict_of(analysis, draft.origins())
                    result = _Tried(draft, analysis, verdict, flips(self.seed.verdict, verdict))
        except (NotApplicable, ValidationError, WorldSpecError):  # a target gone, a run or world that cannot be
            pass
        self.tried[key] = result
        return result

    def _combinations(self, candidates: list[Edit]) -> None:
        by_operator: dict[str, list[Edit]] = {}
        for change in candidates:
            by_operator.setdefault(change.operator, []).append(change)
        names = sorted(by_operator)
        if len({change.where for change in candidates}) < 2:
            return
        one = st.sampled_from(names).flatmap(lambda name: st.sampled_from(by_operator[name]))
        edits = st.lists(one, min_size=2, max_size=3, unique_by=lambda e: e.where)

        @given(edits)
        def probe(chosen: list[Edit]) -> None:
            self.evaluate(chosen)

        hypothesis_seed(self.random_seed)(probe)
        try:
            Settings(
                max_examples=self.tries, database=None, deadline=None, phases=(Phase.generate,),
                suppress_health_check=list(HealthCheck), verbosity=Verbosity.quiet, print_blob=False,
            )(probe)()
        except Unsatisfiable:  # too few distinct places to combine edits at: the single edits stand
            pass

    def _keep(self, candidates: list[Edit]) -> list[Mutant]:
        rank = {change: index for index, change in enumerate(candidates)}  # rule boundaries before world ones
        tried = sorted(self.tried.items(), key=lambda item: (len(item[0]), sorted(rank[e] for e in item[0])))
        kept: dict[tuple, Mutant] = {}
        runs: set[str] = set()
        for edits, result in tried:
            if result is None or not result.flips:
                continue
            mutant = self._shrink(edits, result)
            if mutant.fingerprint not in runs:
                runs.add(mutant.fingerprint)
                kept.setdefault(mutant.dedupe_key, mutant)
        for edits, result in tried:
            if result is None or result.flips or len(edits) != 1:
                continue
            mutant = self._boundary(edits[0], result, candidates)
            if mutant is not None and mutant.fingerprint not in runs:
                runs.add(mutant.fingerprint)
                kept.setdefault(mutant.dedupe_key, mutant)
        return list(kept.values())

    def _shrink(self, edits: tuple[Edit, ...], result: _Tried) -> Mutant:
        current, best = list(edits), result
        shrinking = True
        while shrinking and len(current) > 1:
            shrinking = False
            for index in range(len(current)):
                fewer = current[:index] + current[index + 1:]
                trial = self.evaluate(fewer)
                if trial is not None and trial.flips == result.flips:
                    current, best, shrinking = fewer, trial, True
                    break
        return Mutant(tuple(sorted(current)), best.draft, best.analysis, best.verdict, best.flips)

    def _boundary(self, change: Edit, result: _Tried, candidates: list[Edit]) -> Mutant | None:
        near = sorted(
            (c for c in candidates if c.where != change.where),
            key=lambda c: (c.target != change.target, c.operator != change.operator),
        )
        probes = 0
        for extra in near:
            alone = self.tried.get((extra,))
            if alone is None or alone.flips:  # an edit that flips the original alone shows no boundary here
                continue
            further = self.evaluate((change, extra))
            probes += 1
            moved = flips(result.verdict, further.verdict) if further is not None else ()
            if moved:
                return Mutant((change,), result.draft, result.analysis, result.verdict, (), extra, moved)
            if probes == BOUNDARY_PROBES:
                break
        return None


def choose(mutants: list[Mutant], count: int) -> list[Mutant]:
    """``count`` mutants: flipping before boundary ones, smaller changes first, and each pick the one that
    covers most that the picks before it did not (a pair class, a detector, an operator)."""
    pool = sorted(mutants, key=lambda m: (m.on_boundary, len(m.edits), m.edits))
    chosen: list[Mutant] = []
    covered: set[tuple[str, str]] = set()
    while pool and len(chosen) < count:
        best = max(pool, key=lambda m: len(m.covers() - covered))
        if not best.covers() - covered:
            best = pool[0]
        pool.remove(best)
        chosen.append(best)
        covered |= best.covers()
    return chosen


def draft_is_plausible(seen: Seen, draft: Draft, world_is_state: bool = True) -> bool:
    """Every argument of every call is one a model could have produced (:mod:`.plausible`), given what the
    run showed it and the (possibly mutated) world's visible facts."""
    extended = Seen(set(seen.values), set(seen.words), set(seen.numbers), list(seen.boundaries), list(seen.principals))
    for value in world_visible(draft.world, world_is_state):
        extended.add(value)
    for _, _, call in draft.calls():
        shell = call.get("tool") == "run_command"
        if not all(is_plausible(value, extended, shell) for value in (call.get("arguments") or {}).values()):
            return False
    return True
