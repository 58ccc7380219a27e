"""The search: shrunk counterexamples for every distinct kind of divergence, then a counting pass.

Each search round runs the state machine until it fails on a divergence of a kind not found before;
hypothesis shrinks the failing sequence, which is kept (world, calls, outcomes) and its kind added to the
found set; the next round looks for the kinds left. A round that finds nothing ends the search. A separate
pass, which never fails, counts agreement per tool and divergences per class; a kind only that pass met (a
rare one, such as a rate limit three agreeing calls deep) keeps its first sequence, from which every call
the divergence does not need is dropped. Every round's seed derives
from ``seed``, the domain and the profile, so a run is reproducible.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, Verbosity, seed as hypothesis_seed, settings as Settings
from hypothesis.stateful import run_state_machine_as_test

from litmus_replay.envs.runtime import Runtime

from .divergence import Divergence
from .machine import NewDivergence, Step, Tally, machine_for, play
from .space import CallSpace

__all__ = ["Counterexample", "FidelityResult", "measure"]

DEFAULT_EXAMPLES = 100
DEFAULT_STEPS = 5
MAX_ROUNDS = 40


@dataclass(frozen=True)
class Counterexample:
    """A minimal call sequence whose last call diverges in a kind no shorter sequence showed first."""

    domain: str
    profile: str | None
    world: dict[str, Any]
    steps: tuple[Step, ...]

    @property
    def divergence(self) -> Divergence:
        divergence = self.steps[-1].divergence
        assert divergence is not None
        return divergence

    @property
    def kind(self) -> str:
        return self.divergence.kind

    @property
    def call_key(self) -> str:
        """The key the diverging call has in the scenario written for it (one call per turn)."""
        return f"t{len(self.steps)}.c1"

    def to_dict(self) -> dict[str, Any]:
        return {
            "domain": self.domain,
            "profile": self.profile,
            **self.divergence.to_dict(),
            "call": self.call_key,
            "calls": [
                {"request": step.request, "stub": step.stub.to_dict(), "real": step.real.to_dict()}
                for step in self.steps
            ],
        }


@dataclass
class FidelityResult:
    """One domain (under one stub profile): agreement counted, and the counterexamples found."""

    domain: str
    profile: str | None
    tally: Tally
    counterexamples: list[Counterexample] = field(default_factory=list)
    search_examples: int = 0
    error: str | None = None

    @property
    def label(self) -> str:
        return self.domain if self.profile is None else f"{self.domain}:{self.profile}"

    @property
    def agreement(self) -> float:
        return self.tally.agreement


def measure(
    space: CallSpace,
    stub_runtime: Runtime,
    real_runtime: Runtime,
    *,
    profile: str | None = None,
    examples: int = DEFAULT_EXAMPLES,
    seed: int = 0,
    steps: int = DEFAULT_STEPS,
) -> FidelityResult:
    """Search one domain's stub against its real twin, then count agreement over ``examples`` sequences."""
    worlds = space.world_strategy(profile)
    result = FidelityResult(space.domain, profile, Tally())
    found: set[str] = set()
    search = Tally()
    for round_number in range(MAX_ROUNDS):
        machine = machine_for(worlds, space.calls, stub_runtime, real_runtime, search, found)
        try:
            _run(machine, examples, _seed(seed, result.label, round_number), steps)
        except NewDivergence as failure:
            found.add(failure.divergence.kind)
            minimal = _fewer_calls(failure.world, failure.steps, failure.divergence.kind, stub_runtime, real_runtime)
            result.counterexamples.append(Counterexample(space.domain, profile, failure.world, tuple(minimal)))
            continue
        except Exception as exc:  # a runtime lost mid-run: report it with what was found so far
            result.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            break
        break
    result.search_examples = search.examples
    if result.error is None:
        try:
            _run(machine_for(worlds, space.calls, stub_runtime, real_runtime, result.tally), examples,
                 _seed(seed, result.label, -1), steps)
        except Exception as exc:
            result.error = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        # A kind the search rounds missed but the counting pass met: its first sequence, cut to what it needs.
        for kind, (world, sequence) in result.tally.first.items():
            if kind not in found:
                found.add(kind)
                minimal = _fewer_calls(world, sequence, kind, stub_runtime, real_runtime)
                result.counterexamples.append(Counterexample(space.domain, profile, world, tuple(minimal)))
    result.counterexamples.sort(key=lambda c: (len(c.steps), c.kind))
    return result


def _fewer_calls(world: dict[str, Any], steps: list[Step], kind: str, stub_runtime: Runtime,
                 real_runtime: Runtime) -> list[Step]:
    """Hypothesis's shrink, finished: drop each earlier call the divergence does not need (greedy)."""
    index = 0
    while index < len(steps) - 1:
        requests = [step.request for k, step in enumerate(steps) if k != index]
        shorter = play(world, requests, stub_runtime, real_runtime, kind)
        if shorter is not None and len(shorter) < len(steps):
            steps = shorter
        else:
            index += 1
    return steps


def _run(machine: Any, examples: int, seed: int, steps: int) -> None:
    hypothesis_seed(seed)(machine)
    run_state_machine_as_test(
        machine,
        settings=Settings(
            max_examples=examples,
            stateful_step_count=steps,
            database=None,
            deadline=None,
            phases=(Phase.generate, Phase.shrink),
            suppress_health_check=list(HealthCheck),
            report_multiple_bugs=False,
            print_blob=False,
            verbosity=Verbosity.quiet,
        ),
    )


def _seed(seed: int, label: str, round_number: int) -> int:
    """A round's seed: stable across processes (unlike ``hash`` of a string)."""
    return zlib.crc32(f"{seed}/{label}/{round_number}".encode()) ^ (seed & 0xFFFFFFFF)
