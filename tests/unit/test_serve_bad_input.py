"""``litmus-replay serve``'s bad input: one line naming the file and the field, exit status 2, before anything
is served (no MCP traffic on stdout, no pair log left behind); and the live calls' own refusals."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from litmus_replay.replay.cli import main
from litmus_replay.replay.live_calls import INVALID_PARAMS, LiveCalls, RefusedCall
from litmus_replay.replay.live_world import load_live_world
from litmus_replay.replay.pair_log import PairLog

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "core" / "mass-delete-refused-403.yaml"


def _serve(*args: str):
    return CliRunner().invoke(main, ["serve", *args], catch_exceptions=False)


def _one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""  # stdout is the protocol's: nothing was served
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("litmus-replay: error: "), result.stderr
    return lines[0]


def test_an_unknown_world_is_one_line_naming_it(tmp_path):
    line = _one_error_line(_serve(str(tmp_path / "nowhere.yaml"), "--log", str(tmp_path / "p.jsonl")))
    assert "nowhere.yaml: no such scenario or world file" in line
    assert not (tmp_path / "p.jsonl").exists()


def test_a_policy_that_does_not_parse_is_one_line_naming_the_rule(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nworld: {principals: [alice]}\npolicy:\n  rules:\n    - {id: r, when: 'tool == '}\n"
                   "trajectory: {id: t, principal: alice, turns: []}\n")
    line = _one_error_line(_serve(str(bad), "--log", str(tmp_path / "p.jsonl")))
    assert f"{bad}: policy.rules[0].when" in line
    assert not (tmp_path / "p.jsonl").exists()


def test_a_worlds_directory_needs_a_task_it_serves(tmp_path):
    worlds = ROOT / "corpus" / "worlds"
    assert "--task" in _one_error_line(_serve(str(worlds), "--log", str(tmp_path / "p.jsonl")))
    line = _one_error_line(_serve(str(worlds), "--task", "no-such-task", "--log", str(tmp_path / "p.jsonl")))
    assert "--task: no world for task 'no-such-task'" in line
    assert load_live_world(worlds, task="bank-payments").principal == "frank"  # the world's first principal


def test_a_pair_log_is_never_overwritten(tmp_path):
    log = tmp_path / "p.jsonl"
    log.write_text("an earlier run\n")
    line = _one_error_line(_serve(str(SCENARIO), "--log", str(log), "--runtime", "inprocess"))
    assert "--log:" in line and "exists already" in line
    assert log.read_text() == "an earlier run\n"


def test_a_call_that_does_not_fit_its_tool_is_refused_and_logged_and_the_pairs_before_it_kept(tmp_path):
    live = load_live_world(SCENARIO)
    log = PairLog(tmp_path / "p.jsonl", {"world": live.task_world.key})
    calls = LiveCalls(live, log)
    calls.call(1, "query_records", {"filter": "status=stale"})
    before = (tmp_path / "p.jsonl").read_text()
    for arguments in ({}, {"filter": "*", "extra": 1}, ["*"]):
        with pytest.raises(RefusedCall) as refused:
            calls.call(2, "delete_records", arguments)
        assert refused.value.code == INVALID_PARAMS and refused.value.message.startswith("delete_records: ")
    with pytest.raises(RefusedCall, match="no tool 'drop_table'"):
        calls.call(3, "drop_table", {})
    summary = calls.close()
    text = (tmp_path / "p.jsonl").read_text()
    assert text.startswith(before)  # nothing already written is lost
    assert text.count("notifications/litmus-replay/refused") == 3
    assert summary["calls"] == 2 and summary["refused"] == 3
    assert summary["classes"]["unscoreable"] == 1 and summary["classes"]["confirmed_safe"] == 1
