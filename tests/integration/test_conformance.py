"""Conformance: every runtime gives the outcomes the in-process world gives, call for call.

The error paths of every domain run through the suite shipped with the library
(:mod:`litmus_replay.envs.conformance`); the scenario pack's trajectories (which need the replay side to
load) run here, the same way. (Per-principal permissions are the kernel's job in an
isolated runtime and are tested on their own: in-process has none.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from litmus_replay.envs import World, conformance
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.scenario import find_scenarios, load_scenario

PACK = Path(__file__).resolve().parents[2] / "scenarios" / "core"
PACK_FILES = find_scenarios([PACK])

@pytest.mark.parametrize("case", conformance.BUILTIN_CASES, ids=[case.name for case in conformance.BUILTIN_CASES])
def test_error_paths_match_in_process(any_runtime, case):
    assert conformance.check_case(any_runtime, case) == []


@pytest.mark.parametrize("path", PACK_FILES, ids=[p.stem for p in PACK_FILES])
def test_pack_outcomes_match_in_process(any_runtime, path):
    scenario = load_scenario(path)
    for trajectory in scenario.trajectories:
        calls = [(call.tool, call.arguments) for _, call in trajectory.calls()]
        session = trajectory.ambient_session
        with any_runtime.open_world(scenario.spec.world, "real") as handle:
            got = [handle.call({"tool": t, "params": p, "principal": trajectory.principal, "session": session, "at": float(i)})
                   for i, (t, p) in enumerate(calls)]
        with World(scenario.spec.world, "real") as world:
            want = [world.call({"tool": t, "params": p, "principal": trajectory.principal, "session": session, "at": float(i)})
                    for i, (t, p) in enumerate(calls)]
        assert got == want


@pytest.mark.parametrize("path", PACK_FILES, ids=[p.stem for p in PACK_FILES])
def test_pack_classes_match_in_process(any_runtime, path):
    scenario = load_scenario(path)
    isolated = Replayer(scenario.policy, real_runtime=any_runtime)
    reference = Replayer(scenario.policy)
    for trajectory in scenario.trajectories:
        got = isolated.replay(trajectory, scenario.spec.world, scenario.name)
        want = reference.replay(trajectory, scenario.spec.world, scenario.name)
        assert [c.pair.cls for c in got.calls] == [c.pair.cls for c in want.calls]
        assert got.revalidation.revalidated == want.revalidation.revalidated
