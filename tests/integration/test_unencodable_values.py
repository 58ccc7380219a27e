"""Values JSON and CEL cannot carry, made inside an isolated world: a file name that is not UTF-8, created
by a recorded shell command, and a lone surrogate in a recorded argument. Each call gets a lossless result
or is refused alone with its reason; the calls after it replay, and the JSON report reads back unchanged."""

from __future__ import annotations

import json

from litmus_replay.replay.analysis import analyse
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.model import Trajectory
from litmus_replay.replay.policy import Policy, PolicySpec
from litmus_replay.replay.report import run_document

WORLD = {"principals": ["alice"], "shell": {"timeout": 5}, "files": {"tree": {"/workspace/README.md": "notes\n"}}}
CALLS = [
    {"tool": "run_command", "arguments": {"command": "touch \"$(printf 'bad\\377name')\"; ls"}},
    {"tool": "write_file", "arguments": {"path": "/workspace/half\ud83d.txt", "content": "half \ud83d"}},
    {"tool": "list_dir", "arguments": {"path": "/workspace"}},
    {"tool": "read_file", "arguments": {"path": "/workspace/README.md"}},
]


def test_undecodable_names_and_lone_surrogates_cost_no_other_call(isolated_runtime):
    trajectory = Trajectory.model_validate({"id": "t", "principal": "alice", "turns": [{"calls": CALLS}]})
    policy = Policy.compile(PolicySpec.model_validate(
        {"rules": [{"id": "odd-name", "judge": "attempt",
                    "when": "tool == 'list_dir' && output.exists(name, name.contains('bad\\\\udcffname'))"}]}))
    replay = Replayer(policy, real_runtime=isolated_runtime).replay(trajectory, WORLD)
    made, written, listed, read = replay.calls
    assert made.harness_error is None and made.real.status == "ok"
    assert written.harness_error is None  # refused or done, but answered
    assert listed.harness_error is None and listed.real.status == "ok"
    assert "bad\udcffname" in listed.real.output  # the name as the kernel holds it, byte for byte
    assert listed.commit.policy_verdict == "deny"  # the policy saw the name, as its escape
    assert read.real.status == "ok" and read.real.output == "notes\n"
    document = json.loads(json.dumps(run_document([analyse(replay)], [])))
    assert document["results"][0]["calls"][1]["arguments"]["path"] == "/workspace/half\ud83d.txt"
