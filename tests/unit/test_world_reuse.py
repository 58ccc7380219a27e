"""What a world keeps from one call or one world to the next, to do less work, must change nothing a
call observes: the state before a call taken from the last call's state after, and a stub file tree
copied from one laid out before."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from litmus_replay.envs.domains import _files_stub
from litmus_replay.envs.world import World

SPEC = {
    "principals": ["alice", "bob"],
    "files": {"tree": {"/workspace/a.txt": "hello", "/workspace/d/b.txt": "b"}, "canaries": {"/home/alice/key": "K"}},
    "records": {"rows": [{"id": 1, "owner": "bob", "data": {"s": 1}}, {"id": 2, "owner": "alice", "data": {"s": 2}}]},
    "bank": {"accounts": {"acc-a": {"owner": "alice", "balance": 100}, "acc-b": {"owner": "bob", "balance": 50}}},
}
CALL = st.sampled_from([
    ("read_file", {"path": "/workspace/a.txt"}),
    ("write_file", {"path": "/workspace/a.txt", "content": "changed"}),
    ("write_file", {"path": "/workspace/new.txt", "content": "new"}),
    ("delete_path", {"path": "/workspace/d/b.txt"}),
    ("make_symlink", {"target": "/home/alice", "link_path": "/workspace/h"}),
    ("move_path", {"src": "/workspace/a.txt", "dst": "/workspace/d/a.txt"}),
    ("query_records", {"filter": "*"}),
    ("update_record", {"id": 1, "fields": {"s": 9}}),
    ("delete_records", {"filter": "*"}),
    ("transfer_funds", {"from": "acc-a", "to": "acc-b", "amount": 10}),
    ("get_balance", {"account": "acc-a"}),
])


def _outcomes(world: World, calls) -> list[dict]:
    return [world.call({"tool": tool, "params": params, "principal": principal, "state": True})
            for (tool, params), principal in calls]


@settings(max_examples=40, deadline=None)
@given(calls=st.lists(st.tuples(CALL, st.sampled_from(["alice", "bob"])), max_size=12),
       semantics=st.sampled_from(["stub", "real"]))
def test_state_carried_from_the_last_call_changes_no_outcome(calls, semantics):
    with World(SPEC, semantics) as reusing, World(SPEC, semantics) as reading:
        reading._reuse_snapshots = False
        assert _outcomes(reusing, calls) == _outcomes(reading, calls)


def test_a_world_with_a_domain_that_may_reach_into_others_reads_state_afresh():
    with World({**SPEC, "shell": {}}, "stub") as world:
        assert not world._reuse_snapshots
    with World(SPEC, "stub") as world:
        assert world._reuse_snapshots


def test_a_copied_stub_tree_is_the_tree_laid_out_and_the_worlds_stay_apart():
    calls = [(("write_file", {"path": "/workspace/a.txt", "content": "mine"}), "alice"),
             (("delete_path", {"path": "/workspace/d/b.txt"}), "alice")]
    _files_stub._TEMPLATES = _files_stub._Templates()  # a fresh cache: this test lays the tree out itself
    with World(SPEC, "stub") as laid_out:  # lays the tree out, keeps a copy
        first = _outcomes(laid_out, calls)
    with World(SPEC, "stub") as copied, World(SPEC, "stub") as other:
        assert copied._domains["files"].fs is not other._domains["files"].fs
        assert _outcomes(copied, calls) == first
        assert other.snapshot() != copied.snapshot()  # the other copy saw none of it
        with World(SPEC, "stub") as fresh:
            assert other.snapshot() == fresh.snapshot()
    renamed = {**SPEC, "principals": {"alice": {"uid": 20001}, "bob": {}}}  # another owner: another tree
    with World(renamed, "stub") as world, World(SPEC, "stub") as original:
        assert world.snapshot() != original.snapshot()


def test_values_of_a_call_touching_more_than_effects_carry_are_learnt_again():
    spec = {"principals": ["alice"],
            "files": {"tree": {f"/workspace/d/f{i:03}.txt": str(i) for i in range(300)}}}
    calls = [(("move_path", {"src": "/workspace/d", "dst": "/workspace/e"}), "alice"),
             (("write_file", {"path": "/workspace/e/f299.txt", "content": "changed"}), "alice")]
    for semantics in ("stub", "real"):
        with World(spec, semantics) as reusing, World(spec, semantics) as reading:
            reading._reuse_snapshots = False
            got = _outcomes(reusing, calls)
            assert got == _outcomes(reading, calls)
            assert got[1]["effects"]["values"]["files:/workspace/e/f299.txt"]["before"] is not None
