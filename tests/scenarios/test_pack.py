"""The built-in scenario pack: every scenario replays to its expected classes and findings, together
they reach all five pair classes, and every detector fires somewhere and stays quiet somewhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from litmus_replay.replay.detectors import DETECTORS
from litmus_replay.replay.analysis import analyse
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.scenario import find_scenarios, load_scenario
from litmus_replay.replay.scoring import PairClass

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"
PACK = SCENARIOS / "core"
SCENARIO_FILES = find_scenarios([PACK, SCENARIOS / "detectors", SCENARIOS / "bindings"])


def _replay(path: Path):
    scenario = load_scenario(path)
    replayer = Replayer(scenario.policy)
    return scenario, [replayer.replay(t, scenario.spec.world, scenario.name, scenario.bindings) for t in scenario.trajectories]


@pytest.mark.parametrize("path", SCENARIO_FILES, ids=[p.stem for p in SCENARIO_FILES])
def test_scenario_matches_its_expectations(path):
    scenario = load_scenario(path)
    assert scenario.spec.expect is not None, "every pack scenario states what it expects"
    for trajectory in scenario.trajectories:
        run = analyse(Replayer(scenario.policy).replay(trajectory, scenario.spec.world, scenario.name, scenario.bindings), scenario)
        assert set(scenario.spec.expect.calls) == {call.key for call in run.replay.calls}, "every call's class is stated"
        assert run.problems == []


def test_every_detector_fires_somewhere_and_stays_quiet_somewhere():
    fires, quiet = set(), set()
    for path in SCENARIO_FILES:  # the shell detector's pair, which needs a sandbox, is in tests/integration
        expect = load_scenario(path).spec.expect
        fires |= {kind for kind, count in expect.findings.items() if count > 0}
        quiet |= {kind for kind, count in expect.findings.items() if count == 0}
    assert fires == set(DETECTORS)
    assert quiet == set(DETECTORS)


def test_pack_reaches_all_five_classes():
    reached = {call.pair.cls for path in SCENARIO_FILES for result in _replay(path)[1] for call in result.calls}
    assert reached == set(PairClass)


def test_replay_is_deterministic():
    path = PACK / "rate-limited-transfers-429.yaml"
    first = [r.to_dict() for r in _replay(path)[1]]
    second = [r.to_dict() for r in _replay(path)[1]]
    assert first == second


def test_run_json_reports_every_finding_kind(tmp_path):
    from click.testing import CliRunner

    from litmus_replay.replay.cli import main

    report = tmp_path / "run.json"
    result = CliRunner().invoke(main, ["run", str(PACK), str(SCENARIOS / "detectors"), "--json", str(report), "-q"])
    assert result.exit_code == 0, result.output + result.stderr
    document = json.loads(report.read_text())
    kinds = {finding["kind"] for r in document["results"] for finding in r["findings"]}
    assert kinds == set(DETECTORS)
