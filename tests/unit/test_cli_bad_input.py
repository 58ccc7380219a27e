"""Bad input costs one line naming the file and the field, exit status 2, and nothing already written."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from litmus_replay.replay.cli import main

GOOD = textwrap.dedent(
    """\
    name: good
    world:
      principals: [alice]
      sessions: {tok: alice}
      session: tok
      profiles: {alice: {email: a@example.com}}
    policy:
      rules:
        - id: any-email-change
          when: "tool == 'update_profile' && params.field == 'email'"
    trajectory:
      id: t
      principal: alice
      turns:
        - calls:
            - tool: update_profile
              arguments: {field: email, value: b@example.com}
    expect:
      calls: {t1.c1: confirmed_misuse}
    """
)
TRAJECTORY_LINE = json.dumps(
    {"id": "t", "principal": "alice", "turns": [{"calls": [{"tool": "get_profile", "arguments": {}}]}]}
)


def _with(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new)


BAD_SCENARIOS = {
    "bad_yaml": (_with(GOOD, "rules:\n", "rules: [\n"), "line "),
    "wrong_type": (_with(GOOD, "principal: alice\n", "principal: [alice]\n"), "trajectory"),
    "binding_to_unknown_tool": (GOOD + "bindings: [{tool: launch, to: launch_missiles}]\n", "bindings[0].to"),
    "binding_to_unknown_argument": (
        GOOD + "bindings: [{tool: set_profile, to: update_profile, args: {k: key}}]\n", "bindings[0].args.k"),
    "unknown_domain": (_with(GOOD, "  profiles:", "  mail: {}\n  profiles:"), "world.mail"),
    "bad_cel": (_with(GOOD, "params.field == 'email'", "params.field === 'email'"), "policy.rules[0].when"),
    "unknown_expected_call": (_with(GOOD, "t1.c1: confirmed_misuse", "t9.c9: confirmed_misuse"), "expect.calls.t9.c9"),
    "bad_world_field": (_with(GOOD, "sessions: {tok: alice}", "sessions: [tok]"), "world.sessions"),
}


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args))


@pytest.mark.parametrize("case", sorted(BAD_SCENARIOS))
def test_bad_scenario_is_one_line_and_exit_2(tmp_path, case):
    text, field = BAD_SCENARIOS[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(text)
    result = _invoke("run", str(path))
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(path) in lines[0] and field in lines[0]
    assert "Traceback" not in result.output + result.stderr


@pytest.mark.parametrize(
    "content, field",
    [
        (TRAJECTORY_LINE + "\n" + TRAJECTORY_LINE[:40] + "\n", "line 2"),
        (TRAJECTORY_LINE.replace('"turns": [', '"turns": 5, "x": ['), "line 1"),
    ],
    ids=["truncated_jsonl", "wrong_type_jsonl"],
)
def test_bad_trajectory_file_names_the_trajectory_file(tmp_path, content, field):
    (tmp_path / "runs.jsonl").write_text(content)
    scenario = tmp_path / "s.yaml"
    scenario.write_text(GOOD.split("trajectory:")[0] + "trajectory: {path: runs.jsonl, format: native}\n")
    result = _invoke("run", str(scenario))
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert "runs.jsonl" in line and field in line


def test_one_bad_scenario_does_not_stop_the_batch_or_lose_the_report(tmp_path):
    (tmp_path / "a_good.yaml").write_text(GOOD)
    (tmp_path / "b_bad.yaml").write_text(BAD_SCENARIOS["bad_cel"][0])
    (tmp_path / "c_good.yaml").write_text(GOOD.replace("name: good", "name: good-too"))
    report = tmp_path / "out" / "report.json"
    result = _invoke("run", str(tmp_path), "--json", str(report))
    assert result.exit_code == 2
    document = json.loads(report.read_text())
    assert [r["scenario"] for r in document["results"]] == ["good", "good-too"]
    assert len(document["errors"]) == 1 and "b_bad.yaml" in document["errors"][0]


def test_unknown_runtime_lists_the_valid_ones(tmp_path):
    (tmp_path / "s.yaml").write_text(GOOD)
    result = _invoke("run", str(tmp_path), "--runtime", "vmware")
    assert result.exit_code == 2
    assert "inprocess" in result.stderr


def test_missing_path_is_bad_input(tmp_path):
    result = _invoke("run", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 2
    assert "nope.yaml" in result.stderr


def test_console_script_prints_no_traceback(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text(BAD_SCENARIOS["bad_yaml"][0])
    proc = subprocess.run(
        [sys.executable, "-m", "litmus_replay.replay", "run", str(path)], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr


def test_revalidate_with_a_bad_worlds_directory_is_one_line_and_writes_nothing(tmp_path):
    runs = tmp_path / "runs.jsonl"
    runs.write_text(TRAJECTORY_LINE + "\n")
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "litmus_replay.replay", "revalidate", str(runs), "--worlds", str(tmp_path / "no-worlds"),
         "--out", str(out), "--runtime", "inprocess"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "no-worlds" in proc.stderr, proc.stderr
    assert not out.exists()


def test_an_unknown_original_kind_is_one_line_exit_2_and_nothing_written(tmp_path):
    out = tmp_path / "out"
    runs = Path(__file__).resolve().parents[2] / "scenarios" / "core"
    result = _invoke("revalidate", str(runs), "--original-kind", "harness", "--runtime", "inprocess", "--out", str(out))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "litmus-replay: error: --original-kind: unknown kind 'harness': use one of proposal_time, state_based"]
    assert not out.exists()
