"""The trajectory model and its native JSONL format."""

from __future__ import annotations

import json

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from litmus_replay.replay.errors import TrajectoryError
from litmus_replay.replay.model import Trajectory, dump_jsonl, json_schema, load_jsonl

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

COMMITTED_SCHEMA = ROOT / "replay" / "schemas" / "trajectory-v1.schema.json"

TRAJECTORY = {
    "id": "run-1",
    "principal": "alice",
    "turns": [
        {"text": "look", "calls": [{"id": "c", "tool": "read_file", "arguments": {"path": "a"}}]},
        {"calls": [{"id": "c", "tool": "read_file", "arguments": {"path": "b"}}, {"tool": "list_dir"}]},
    ],
}


def test_calls_get_stable_positional_keys_even_with_repeated_or_missing_ids():
    trajectory = Trajectory.model_validate(TRAJECTORY)
    assert [call.key for _, call in trajectory.calls()] == ["t1.c1", "t2.c1", "t2.c2"]
    assert [turn for turn, _ in trajectory.calls()] == [1, 2, 2]


def test_committed_schema_matches_the_model():
    committed = json.loads(COMMITTED_SCHEMA.read_text())
    assert committed == json.loads(json.dumps(json_schema(), sort_keys=True)), (
        "regenerate with: litmus-replay schema -o replay/schemas/trajectory-v1.schema.json"
    )


def test_schema_accepts_what_the_model_writes(tmp_path):
    path = tmp_path / "runs.jsonl"
    dump_jsonl([Trajectory.model_validate(TRAJECTORY)], path)
    for line in path.read_text().splitlines():
        jsonschema.validate(json.loads(line), json_schema())
    assert load_jsonl(path)[0] == Trajectory.model_validate(TRAJECTORY)


def test_truncated_line_names_file_and_line(tmp_path):
    path = tmp_path / "runs.jsonl"
    good = json.dumps(TRAJECTORY)
    path.write_text(good + "\n" + good[: len(good) // 2] + "\n")
    with pytest.raises(TrajectoryError) as raised:
        load_jsonl(path)
    assert raised.value.file == str(path)
    assert raised.value.field == "line 2"
    assert "\n" not in str(raised.value)


def test_wrong_type_names_the_field(tmp_path):
    bad = json.loads(json.dumps(TRAJECTORY))
    bad["turns"][1]["calls"][0]["arguments"] = ["not", "a", "mapping"]
    path = tmp_path / "runs.jsonl"
    path.write_text(json.dumps(bad) + "\n")
    with pytest.raises(TrajectoryError) as raised:
        load_jsonl(path)
    assert raised.value.field == "line 1: turns[1].calls[0].arguments"


@given(st.text(st.characters(blacklist_categories=("Cs",)), max_size=200))
def test_arbitrary_lines_fail_only_with_a_trajectory_error(tmp_path_factory, text):
    path = tmp_path_factory.mktemp("fuzz") / "runs.jsonl"
    path.write_text(text, encoding="utf-8")
    try:
        load_jsonl(path)
    except TrajectoryError as exc:
        assert exc.file == str(path) and exc.field
