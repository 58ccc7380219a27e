"""The built-in scenario pack: every scenario replays to its expected classes, and together they reach
all five pair classes."""

from __future__ import annotations

from pathlib import Path

import pytest

from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.scenario import find_scenarios, load_scenario
from litmus_replay.replay.scoring import PairClass

PACK = Path(__file__).resolve().parents[2] / "scenarios" / "core"
SCENARIO_FILES = find_scenarios([PACK])


def _replay(path: Path):
    scenario = load_scenario(path)
    replayer = Replayer(scenario.policy)
    return scenario, [replayer.replay(t, scenario.spec.world, scenario.name) for t in scenario.trajectories]


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=[p.stem for p in SCENARIO_FILES])
def test_scenario_matches_its_expected_classes(path):
    scenario, results = _replay(path)
    assert scenario.spec.expect is not None, "every pack scenario states what it expects"
    for result in results:
        classes = {call.key: call.pair.cls for call in result.calls}
        reasons = {call.key: call.pair.reason for call in result.calls}
        assert set(scenario.spec.expect.calls) == set(classes), "every call's class is stated"
        assert scenario.check(classes, reasons, result.revalidation.revalidated) == []


def test_pack_reaches_all_five_classes():
    reached = {call.pair.cls for path in SCENARIO_FILES for result in _replay(path)[1] for call in result.calls}
    assert reached == set(PairClass)


def test_replay_is_deterministic():
    path = PACK / "rate-limited-transfers-429.yaml"
    first = [r.to_dict() for r in _replay(path)[1]]
    second = [r.to_dict() for r in _replay(path)[1]]
    assert first == second
