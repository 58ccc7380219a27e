"""Conformance: every runtime gives the outcomes the in-process world gives, call for call.

The same requests go to a world in the runtime under test and to an in-process world built from the
same spec; outcomes and final snapshots must be identical. The cases are the scenario pack's
trajectories plus error paths of every domain. (Per-principal permissions are the kernel's job in an
isolated runtime and are tested on their own: in-process has none.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from litmus_replay.envs import World
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.scenario import find_scenarios, load_scenario

PACK = Path(__file__).resolve().parents[2] / "scenarios" / "core"
PACK_FILES = find_scenarios([PACK])

ERROR_CASES = {
    "files": (
        {"principals": ["alice"], "files": {"tree": {"/workspace/a.txt": "x", "/workspace/loop": {"symlink": "/workspace/loop"},
                                                     "/workspace/d/f": "y"}}},
        [
            ("read_file", {"path": "/workspace/missing.txt"}),
            ("read_file", {"path": "/workspace/loop"}),
            ("read_file", {"path": "/workspace/a.txt/x"}),
            ("delete_path", {"path": "/workspace/d"}),
            ("list_dir", {"path": "/workspace/a.txt"}),
            ("make_symlink", {"target": "../../../../etc", "link_path": "/workspace/up"}),
            ("read_file", {"path": "/workspace/up/passwd"}),
            ("write_file", {"path": "/workspace/../../outside.txt", "content": "clamped"}),
            ("move_path", {"src": "/workspace/a.txt", "dst": "/workspace/d/g"}),
            ("list_dir", {"path": "/"}),
        ],
    ),
    "records": (
        {"principals": ["alice", "bob"], "records": {"rows": [{"id": 1, "owner": "alice", "data": {"s": "a"}},
                                                              {"id": 2, "owner": "bob", "data": {"s": "b"}}]}},
        [
            ("query_records", {"filter": "s="}),
            ("query_records", {"filter": "owner=alice and"}),
            ("update_record", {"id": 9, "fields": {"s": "z"}}),
            ("update_record", {"id": 2, "fields": {"s": "z"}}),
            ("update_record", {"id": 1, "fields": {"s": "z"}, "if_version": 7}),
            ("delete_records", {"filter": "owner=bob"}),
            ("delete_records", {"filter": {"owner": "alice"}}),
        ],
    ),
    "bank": (
        {"principals": ["alice", "bob"], "bank": {"accounts": {"a": {"owner": "alice", "balance": 10}, "b": {"owner": "bob", "balance": 0}},
                                                   "confirm_above": 5}},
        [
            ("get_balance", {"account": "b"}),
            ("transfer_funds", {"from": "a", "to": "b", "amount": 50}),
            ("transfer_funds", {"from": "a", "to": "nowhere", "amount": 1}),
            ("transfer_funds", {"from": "a", "to": "b", "amount": -1}),
            ("transfer_funds", {"from": "a", "to": "b", "amount": 6}),
            ("confirm_transfer", {"confirmation_id": "cnf-404"}),
            ("confirm_transfer", {"confirmation_id": "cnf-1"}),
            ("confirm_transfer", {"confirmation_id": "cnf-1"}),
        ],
    ),
    "profiles": (
        {"principals": ["alice"], "sessions": {"t": "alice"}, "session": "t", "profiles": {"alice": {"email": "a"}}},
        [
            ("get_profile", {"user": "nobody"}),
            ("update_profile", {"field": "email"}),
            ("update_profile", {"field": "email", "value": "b"}),
        ],
    ),
}


def _run(handle, calls, principal="alice"):
    outcomes = [handle.call({"tool": tool, "params": params, "principal": principal, "at": float(i)})
                for i, (tool, params) in enumerate(calls)]
    return outcomes, handle.snapshot()


def _reference(spec, calls, semantics):
    with World(spec, semantics) as world:
        outcomes = [world.call({"tool": tool, "params": params, "principal": "alice", "at": float(i)})
                    for i, (tool, params) in enumerate(calls)]
        return outcomes, world.snapshot()


@pytest.mark.parametrize("domain", sorted(ERROR_CASES))
def test_error_paths_match_in_process(any_runtime, domain):
    spec, calls = ERROR_CASES[domain]
    with any_runtime.open_world(spec, "real") as handle:
        outcomes, state = _run(handle, calls)
    ref_outcomes, ref_state = _reference(spec, calls, "real")
    for call, got, want in zip(calls, outcomes, ref_outcomes):
        assert got == want, f"{any_runtime.name}: {call} differs"
    assert state == ref_state


@pytest.mark.parametrize("path", PACK_FILES, ids=[p.stem for p in PACK_FILES])
def test_pack_outcomes_match_in_process(any_runtime, path):
    scenario = load_scenario(path)
    for trajectory in scenario.trajectories:
        calls = [(call.tool, call.arguments) for _, call in trajectory.calls()]
        session = trajectory.ambient_session
        with any_runtime.open_world(scenario.spec.world, "real") as handle:
            got = [handle.call({"tool": t, "params": p, "principal": trajectory.principal, "session": session, "at": float(i)})
                   for i, (t, p) in enumerate(calls)]
        with World(scenario.spec.world, "real") as world:
            want = [world.call({"tool": t, "params": p, "principal": trajectory.principal, "session": session, "at": float(i)})
                    for i, (t, p) in enumerate(calls)]
        assert got == want


@pytest.mark.parametrize("path", PACK_FILES, ids=[p.stem for p in PACK_FILES])
def test_pack_classes_match_in_process(any_runtime, path):
    scenario = load_scenario(path)
    isolated = Replayer(scenario.policy, real_runtime=any_runtime)
    reference = Replayer(scenario.policy)
    for trajectory in scenario.trajectories:
        got = isolated.replay(trajectory, scenario.spec.world, scenario.name)
        want = reference.replay(trajectory, scenario.spec.world, scenario.name)
        assert [c.pair.cls for c in got.calls] == [c.pair.cls for c in want.calls]
        assert got.revalidation.revalidated == want.revalidation.revalidated
