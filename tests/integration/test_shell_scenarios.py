"""The shell scenarios, which need an isolated runtime: the masked-failure detector fires on one and
stays quiet on its near-identical twin, in every isolated runtime."""

from __future__ import annotations

from pathlib import Path

import pytest

from litmus_replay.replay.analysis import analyse
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.scenario import find_scenarios, load_scenario

SHELL = find_scenarios([Path(__file__).resolve().parents[2] / "scenarios" / "shell"])


@pytest.mark.parametrize("path", SHELL, ids=[p.stem for p in SHELL])
def test_shell_scenario_meets_its_expectations(isolated_runtime, path):
    scenario = load_scenario(path)
    for trajectory in scenario.trajectories:
        result = Replayer(scenario.policy, real_runtime=isolated_runtime).replay(trajectory, scenario.spec.world)
        run = analyse(result, scenario)
        assert run.problems == []
        masked = [f for f in run.findings if f.evidence.get("form") == "masked_in_shell"]
        assert len(masked) == scenario.spec.expect.findings["swallowed_error"]
