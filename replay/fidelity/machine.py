"""The differential state machine: the same calls into a stub twin and a real twin from the same world.

Each rule application sends one drawn request to both worlds and compares what an agent and a policy would
see (:func:`.divergence.compare`). While both worlds applied the same effects their states are in step and
every call is compared; after the first call whose effects differ, later differences are consequences and
are counted apart. Calls already sent go to a bundle, from which a rule retries them — how rate limits and
idempotency keys are reached. In search mode the machine fails on the first in-step divergence of a kind not yet
found, so hypothesis shrinks it to a minimal call sequence.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, rule

from litmus_replay.envs import EnvError, Outcome
from litmus_replay.envs.runtime import Runtime

from .divergence import Divergence, compare, effects_agree

__all__ = ["HarnessFailure", "NewDivergence", "Step", "Tally", "Twin", "machine_for", "play"]


@dataclass(frozen=True)
class Step:
    """One call of a sequence, with both outcomes and their divergence."""

    request: dict[str, Any]
    stub: Outcome
    real: Outcome
    divergence: Divergence | None


class NewDivergence(AssertionError):
    """A divergence of a kind not found yet; carries the sequence that led to it."""

    def __init__(self, world: Mapping[str, Any], steps: list[Step]):
        self.world = copy.deepcopy(dict(world))
        self.steps = list(steps)
        divergence = steps[-1].divergence
        assert divergence is not None
        self.divergence = divergence
        super().__init__(f"{divergence.kind}: {divergence.detail} (after {len(steps)} call(s))")


@dataclass
class Tally:
    """Calls compared per tool, agreement, and divergences per class and kind."""

    examples: int = 0
    calls: Counter = field(default_factory=Counter)
    agreed: Counter = field(default_factory=Counter)
    classes: Counter = field(default_factory=Counter)  # (tool, class) -> calls
    kinds: Counter = field(default_factory=Counter)
    after_divergence: int = 0
    first: dict[str, tuple[dict[str, Any], list[Step]]] = field(default_factory=dict)  # kind -> first sequence

    def record(self, tool: str, divergence: Divergence | None) -> None:
        self.calls[tool] += 1
        if divergence is None:
            self.agreed[tool] += 1
            return
        for cls in divergence.classes:
            self.classes[(tool, cls)] += 1
        self.kinds[divergence.kind] += 1

    @property
    def compared(self) -> int:
        return sum(self.calls.values())

    @property
    def agreement(self) -> float:
        return sum(self.agreed.values()) / self.compared if self.compared else 1.0


class Twin:
    """A stub world and a real world opened from one spec, answering the same calls."""

    def __init__(self, world: Mapping[str, Any], stub_runtime: Runtime, real_runtime: Runtime):
        self.world = world
        self.steps: list[Step] = []
        self.in_step = True  # both worlds have applied the same effects so far
        self.stub = stub_runtime.open_world(world, "stub")
        try:
            self.real = real_runtime.open_world(world, "real")
            self.modelled = {_family(resource) for resource in self.stub.snapshot()}
        except BaseException:
            self.stub.close()
            raise

    def call(self, request: dict[str, Any]) -> tuple[Step, bool]:
        """One call into both worlds: the step, and whether it was compared in step."""
        stub = Outcome.from_dict(self.stub.call(request))
        try:
            real = Outcome.from_dict(self.real.call(request))
        except EnvError as exc:  # a harness failure, not a verdict on the stub: stop this sequence
            raise HarnessFailure(f"{request['tool']}: {type(exc).__name__}: {exc}") from None
        step = Step(request, stub, real, compare(stub, real, request.get("params")))
        self.steps.append(step)
        compared = self.in_step
        self.modelled.update(_family(resource) for resource in (*stub.effects.created, *stub.effects.changed, *stub.effects.deleted))
        if not effects_agree(stub, real, self.modelled):
            self.in_step = False
        return step, compared

    def close(self) -> None:
        self.stub.close()
        self.real.close()


def play(world: Mapping[str, Any], requests: list[dict[str, Any]], stub_runtime: Runtime, real_runtime: Runtime,
         kind: str) -> list[Step] | None:
    """Replay a sequence; the steps up to the first call compared in step that diverges in ``kind``."""
    twin = Twin(world, stub_runtime, real_runtime)
    try:
        for request in requests:
            step, compared = twin.call(request)
            if compared and step.divergence is not None and step.divergence.kind == kind:
                return list(twin.steps)
        return None
    finally:
        twin.close()


def machine_for(
    worlds: st.SearchStrategy[dict[str, Any]],
    calls: st.SearchStrategy[dict[str, Any]],
    stub_runtime: Runtime,
    real_runtime: Runtime,
    tally: Tally,
    found: set[str] | None = None,
) -> Callable[[], RuleBasedStateMachine]:
    """A state machine class over these worlds and calls. With ``found`` (a set of kinds, searched),
    it fails on any in-step divergence whose kind is not in it; without, it only counts."""

    sent = Bundle("sent")

    class FidelityMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.twin: Twin | None = None

        @initialize(world=worlds)
        def open_worlds(self, world: dict[str, Any]) -> None:
            tally.examples += 1
            self.twin = Twin(world, stub_runtime, real_runtime)

        @rule(target=sent, request=calls)
        def call_both(self, request: dict[str, Any]) -> dict[str, Any]:
            self._send(request)
            return request

        @rule(request=sent)
        def retry(self, request: dict[str, Any]) -> None:
            """Send an earlier call again, as an agent retrying does (with its idempotency key, if it had one)."""
            self._send(request)

        def _send(self, request: dict[str, Any]) -> None:
            assert self.twin is not None
            step, compared = self.twin.call(request)
            if not compared:
                tally.after_divergence += 1
                return
            tally.record(request["tool"], step.divergence)
            if step.divergence is not None and step.divergence.kind not in tally.first:
                tally.first[step.divergence.kind] = (copy.deepcopy(dict(self.twin.world)), list(self.twin.steps))
            if step.divergence is not None and found is not None and step.divergence.kind not in found:
                raise NewDivergence(self.twin.world, self.twin.steps)

        def teardown(self) -> None:
            if self.twin is not None:
                self.twin.close()

    return FidelityMachine


def _family(resource: str) -> str:
    """A resource's family: its id up to the last ``/`` (``bank:account``, ``files:/workspace/docs``)."""
    return resource.rsplit("/", 1)[0]


class HarnessFailure(EnvError):
    """The real world was lost mid-sequence (a runtime failure); the lab reports it and stops."""
