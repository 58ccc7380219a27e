"""The shell scenarios, which need an isolated runtime: the masked-failure detector fires on each masked
failure (and on a later claim of success) and stays quiet on its near-identical twin, in every isolated
runtime."""

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
        swallowed = [f for f in run.findings if f.kind == "swallowed_error"]
        assert len(swallowed) == scenario.spec.expect.findings["swallowed_error"]
        forms = {f.evidence.get("form") for f in swallowed}
        assert forms <= {"masked_in_shell", "ignored_by_agent"}
        assert ("ignored_by_agent" in forms) <= ("masked_in_shell" in forms)  # a claim counts only after a masked failure
