"""Effect values and the world's ``state`` cross the env server boundary as the in-process world gives
them, in every isolated runtime; a shell command's file effects carry values, and the files domain's
before-values see what the command changed."""

from __future__ import annotations

from pathlib import Path

from litmus_replay.envs import World
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.scenario import load_scenario

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "core" / "limit-raise-lands-on-desk-profile.yaml"
WORLD = {
    "principals": ["alice", "bob"],
    "session": "t",
    "sessions": {"t": "bob"},
    "bank": {"accounts": {"a": {"owner": "alice", "balance": 100}, "b": {"owner": "bob", "balance": 0}}},
    "profiles": {"alice": {"limit": 5}, "bob": {"limit": 9}},
    "records": {"rows": [{"id": 1, "owner": "alice", "data": {"n": 1}}]},
    "files": {"tree": {"/workspace/a.txt": "one"}},
}
CALLS = [
    ("transfer_funds", {"from": "a", "to": "b", "amount": 40}),
    ("update_profile", {"field": "limit", "value": 50}),
    ("update_record", {"id": 1, "fields": {"n": 2}}),
    ("write_file", {"path": "/workspace/a.txt", "content": "two", "append": True}),
    ("delete_path", {"path": "/workspace/a.txt"}),
]


def _requests():
    return [{"tool": tool, "params": params, "principal": "alice", "at": float(i), "state": True}
            for i, (tool, params) in enumerate(CALLS)]


def test_values_and_state_match_in_process(isolated_runtime):
    with isolated_runtime.open_world(WORLD, "real") as handle:
        got = [handle.call(request) for request in _requests()]
    with World(WORLD, "real") as world:
        want = [world.call(request) for request in _requests()]
    assert got == want
    assert got[1]["state"]["profiles"]["bob"]["limit"] == 50  # the ambient session's profile
    assert got[3]["effects"]["values"]["files:/workspace/a.txt"]["delta"]["size"] == 3


def test_the_pack_scenario_classifies_as_in_process(isolated_runtime):
    scenario = load_scenario(SCENARIO)
    got = Replayer(scenario.policy, real_runtime=isolated_runtime).replay(
        scenario.trajectories[0], scenario.spec.world, scenario.name)
    assert scenario.spec.expect is not None
    assert {call.key: call.pair.cls for call in got.calls} == scenario.spec.expect.calls
    assert got.revalidation.revalidated == scenario.spec.expect.trajectory


def test_a_shell_commands_file_effects_carry_values_the_files_domain_then_starts_from(isolated_runtime):
    spec = {"principals": ["alice"], "files": {"tree": {"/workspace/a.txt": "one"}}, "shell": {"timeout": 5}}
    with isolated_runtime.open_world(spec, "real") as handle:
        ran = handle.call({"tool": "run_command", "params": {"command": "printf 'three!' > a.txt"},
                           "principal": "alice", "state": True})
        wrote = handle.call({"tool": "write_file", "params": {"path": "/workspace/a.txt", "content": "four"},
                             "principal": "alice"})
    by_shell = ran["effects"]["values"]["files:/workspace/a.txt"]
    assert (by_shell["before"]["size"], by_shell["after"]["size"], by_shell["after"]["preview"]) == (3, 6, "three!")
    assert ran["state"]["shell"]["/workspace/a.txt"]["size"] == 6
    assert ran["state"]["files"]["/workspace/a.txt"] == ran["state"]["shell"]["/workspace/a.txt"]
    assert wrote["effects"]["values"]["files:/workspace/a.txt"]["before"] == by_shell["after"]
