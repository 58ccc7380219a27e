"""Opening a real world ahead of the stub world: the same replay, the same first error, nothing left open."""

from __future__ import annotations

import pytest

from litmus_replay.envs.errors import EnvError, WorldSpecError
from litmus_replay.envs.runtime import InProcessRuntime, PendingWorld
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.model import Trajectory
from litmus_replay.replay.policy import Policy, PolicySpec

WORLD = {"principals": ["alice"], "records": {"rows": [{"id": 1, "owner": "alice", "data": {"v": 1}}]}}
TRAJECTORY = Trajectory.model_validate({
    "id": "t", "principal": "alice",
    "turns": [{"calls": [{"tool": "query_records", "arguments": {"filter": "*"}}]}],
})


class Ahead(InProcessRuntime):
    """Opens its world when asked to open it ahead, and records what happens to it."""

    def __init__(self):
        super().__init__()
        self.events: list[str] = []

    def open_ahead(self, spec, semantics):
        self.events.append("ahead")
        try:
            world = self.open_world(spec, semantics)
        except Exception as exc:
            self.events.append(f"refused: {type(exc).__name__}")
            return super().open_ahead(spec, semantics)

        def cancel():
            self.events.append("cancelled")
            world.close()

        return PendingWorld(lambda: world, cancel)


class BrokenStubs(InProcessRuntime):
    def open_world(self, spec, semantics):
        raise EnvError("the stub world would not open")


def test_the_default_opens_the_world_only_when_it_is_asked_for():
    opened = []

    class Counting(InProcessRuntime):
        def open_world(self, spec, semantics):
            opened.append(semantics)
            return super().open_world(spec, semantics)

    runtime = Counting()
    pending = runtime.open_ahead(WORLD, "real")
    pending.cancel()
    assert opened == []
    world = runtime.open_ahead(WORLD, "real").result()
    assert opened == ["real"] and world.snapshot()
    world.close()


def test_a_replay_with_the_real_world_opened_ahead_is_the_same_replay():
    policy = Policy.compile(PolicySpec())
    plain = Replayer(policy, real_runtime=InProcessRuntime()).replay(TRAJECTORY, WORLD)
    ahead = Ahead()
    replay = Replayer(policy, real_runtime=ahead).replay(TRAJECTORY, WORLD)
    assert replay.to_dict() == plain.to_dict() and ahead.events == ["ahead"]


def test_a_stub_world_that_fails_to_open_cancels_the_real_one_and_its_error_is_raised():
    policy = Policy.compile(PolicySpec())
    ahead = Ahead()
    with pytest.raises(EnvError, match="stub world would not open"):
        Replayer(policy, stub_runtime=BrokenStubs(), real_runtime=ahead).replay(TRAJECTORY, WORLD)
    assert ahead.events == ["ahead", "cancelled"]


def test_a_world_refused_ahead_raises_when_it_is_asked_for_after_the_stub_worlds_own_error():
    policy = Policy.compile(PolicySpec())
    bad = {**WORLD, "records": {"rows": "not a list"}}
    ahead = Ahead()
    with pytest.raises(EnvError, match="stub world would not open"):
        Replayer(policy, stub_runtime=BrokenStubs(), real_runtime=ahead).replay(TRAJECTORY, bad)
    with pytest.raises(WorldSpecError):
        Replayer(policy, real_runtime=ahead).replay(TRAJECTORY, bad)


def test_by_default_calls_asked_for_ahead_are_made_on_the_one_world_as_their_outcomes_are_read():
    runtime = InProcessRuntime()
    pending = runtime.open_ahead(WORLD, "real")
    update = {"tool": "update_record", "params": {"id": 1, "fields": {"v": 2}}, "principal": "alice"}
    outcomes = pending.call_each([update], then_report=True)
    world = pending.result()
    assert pending.result() is world
    before = world.snapshot()
    assert next(outcomes)["status"] == "ok" and world.snapshot() != before
    assert list(outcomes) == []
    world.close()
