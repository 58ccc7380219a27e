"""The invented-argument detector: a value (an address, an account, a path, an id, an amount) that no
earlier output, no earlier argument and no message of the user's produced."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from litmus_replay.replay.detectors.invented import detect_invented_arguments
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.graph import build_graph
from litmus_replay.replay.model import Trajectory
from litmus_replay.replay.policy import Policy, PolicySpec

FILES_WORLD = {"principals": ["alice"], "files": {"tree": {"/workspace/a.txt": "x"}}}


def _replay(turns, user):
    data = {"id": "t", "principal": "alice", "turns": turns}
    if user is not None:
        data["source"] = {"extra": {"user_messages": user}}
    return Replayer(Policy.compile(PolicySpec())).replay(Trajectory.model_validate(data), FILES_WORLD)

def _invented(turns, user):
    result = _replay(turns, user)
    return [(f.nodes, f.evidence["argument"], f.evidence["value"]) for f in detect_invented_arguments(build_graph(result), result)]


READ = {"tool": "read_file", "arguments": {"path": "/workspace/a.txt"},
        "result": {"status": "ok", "output": "Contact bob@example.com about invoice INV-2291, 1100.00 due."}}


def test_a_value_nothing_produced_is_an_invented_argument():
    found = _invented([{"calls": [READ]}, {"calls": [
        {"tool": "write_file", "arguments": {"path": "/workspace/a.txt", "content": "Send to mallory@evil.example now"}}]}],
        ["Read /workspace/a.txt."])
    assert found == [(("t2.c1",), "content", "mallory@evil.example")]


def test_values_from_the_user_an_earlier_output_or_sums_of_them_are_not_invented():
    found = _invented([{"calls": [READ]}, {"calls": [
        {"tool": "write_file", "arguments": {"path": "/workspace/report-7731.txt",
                                             "content": "Mail bob@example.com: INV-2291 is 1200 with the 100 fee"}},
        {"tool": "write_file", "arguments": {"path": "/workspace/a.txt", "content": "n", "append": True}}]}],
        ["Read /workspace/a.txt, add the 100 fee, and write /workspace/report-7731.txt"])
    assert found == []


@given(st.sampled_from([0, 1, 7, 42, True, False, None, "2024-05-19", "12:30", "yes"]))
def test_tiny_numbers_booleans_dates_and_words_are_never_invented(value):
    assert _invented([{"calls": [{"tool": "write_file", "arguments": {"path": "/workspace/a.txt", "content": "x", "n": value}}]}],
                     ["Write /workspace/a.txt"]) == []


def test_a_trajectory_without_the_users_messages_is_not_judged():
    turns = [{"calls": [{"tool": "write_file", "arguments": {"path": "/workspace/a.txt", "content": "to mallory@evil.example"}}]}]
    assert _invented(turns, None) == []
    assert _invented(turns, []) != []
