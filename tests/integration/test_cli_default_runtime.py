"""The command line's default real runtime is the sandbox, and the pack meets its expectations there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from litmus_replay.replay.scenario import find_scenarios, load_scenario

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_run_defaults_to_the_sandbox_and_the_pack_holds(tmp_path, runtime_opener):
    runtime_opener("sandbox").close()  # skips, with the reason, where namespaces are unavailable
    env = {key: value for key, value in os.environ.items() if key != "LITMUS_RUNTIME"}
    report = tmp_path / "run.json"
    proc = subprocess.run(
        [sys.executable, "-m", "litmus_replay.replay", "run", str(SCENARIOS / "core"), str(SCENARIOS / "detectors"),
         "--json", str(report), "-q"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    document = json.loads(report.read_text())
    assert document["summary"]["expectations_failed"] == {}
    packs = [SCENARIOS / "core", SCENARIOS / "detectors"]
    expected = sum(len(load_scenario(path).trajectories) for path in find_scenarios(packs))
    assert document["summary"]["trajectories"] == expected
