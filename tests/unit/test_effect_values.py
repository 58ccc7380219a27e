"""Effects carry values: what moved between which accounts, a field before and after, a file's size and
digest; values are bounded previews; a call's before-values are what the world held before it."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litmus_replay.envs import World
from litmus_replay.envs.outcome import MAX_VALUES, Effects, Outcome
from litmus_replay.envs.values import MAX_DEPTH, MAX_ITEMS, MAX_STRING, MORE, bounded, delta

SEMANTICS = ("stub", "real")

BANK = {
    "principals": ["alice", "bob"],
    "bank": {"accounts": {"a": {"owner": "alice", "balance": 100}, "b": {"owner": "bob", "balance": 5}}},
}


def _call(world: World, tool: str, principal: str = "alice", **params) -> dict:
    return world.call({"tool": tool, "params": params, "principal": principal})


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_a_transfer_says_how_much_moved_and_between_which_accounts(semantics):
    with World(BANK, semantics) as world:
        values = _call(world, "transfer_funds", **{"from": "a", "to": "b", "amount": 40.5})["effects"]["values"]
    assert values == {
        "bank:account/a": {"before": {"owner": "alice", "balance": 100}, "after": {"owner": "alice", "balance": 59.5},
                           "delta": {"balance": -40.5}},
        "bank:account/b": {"before": {"owner": "bob", "balance": 5}, "after": {"owner": "bob", "balance": 45.5},
                           "delta": {"balance": 40.5}},
    }


def test_a_refused_transfer_moved_nothing_and_carries_no_values():
    with World(BANK, "real") as world:
        outcome = _call(world, "transfer_funds", principal="bob", **{"from": "a", "to": "b", "amount": 1})
    assert (outcome["error_code"], outcome["effects"]["values"]) == ("403", {})


def test_a_held_transfer_shows_what_waits_at_the_gate():
    spec = {**BANK, "bank": {**BANK["bank"], "confirm_above": 10}}
    with World(spec, "real") as world:
        held = _call(world, "transfer_funds", **{"from": "a", "to": "b", "amount": 50})["effects"]["values"]
        confirmed = _call(world, "confirm_transfer", confirmation_id="cnf-1")["effects"]["values"]
    assert held == {"bank:pending/cnf-1": {"before": None, "after": {"transfer_id": "txn-1", "from": "a", "to": "b",
                                                                     "amount": 50, "principal": "alice"}}}
    assert confirmed["bank:account/a"]["delta"] == {"balance": -50}
    assert confirmed["bank:pending/cnf-1"]["after"] is None


def test_a_profile_field_before_and_after_in_the_profile_the_world_resolved():
    spec = {"principals": ["alice", "bob"], "session": "t", "sessions": {"t": "bob"},
            "profiles": {"alice": {"email": "a@x", "limit": 5}, "bob": {"email": "b@x", "limit": 7}}}
    with World(spec, "stub") as stub, World(spec, "real") as real:
        by_stub = _call(stub, "update_profile", field="email", value="m@evil")["effects"]["values"]
        by_real = _call(real, "update_profile", field="email", value="m@evil")["effects"]["values"]
    assert by_stub == {"profiles:alice/email": {"before": "a@x", "after": "m@evil"}}
    assert by_real == {"profiles:bob/email": {"before": "b@x", "after": "m@evil"}}


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_a_record_row_before_and_after(semantics):
    spec = {"principals": ["alice"], "records": {"rows": [{"id": 1, "owner": "alice", "data": {"limit": 10, "tag": "x"}},
                                                          {"id": 2, "owner": "alice", "data": {"limit": 3}}]}}
    with World(spec, semantics) as world:
        updated = _call(world, "update_record", id=1, fields={"limit": 25})["effects"]["values"]
        deleted = _call(world, "delete_records", filter="id=2")["effects"]["values"]
    assert updated == {"records:row/1": {
        "before": {"id": 1, "owner": "alice", "version": 1, "data": {"limit": 10, "tag": "x"}},
        "after": {"id": 1, "owner": "alice", "version": 2, "data": {"limit": 25, "tag": "x"}},
        "delta": {"id": 0, "version": 1, "data": {"limit": 15}},
    }}
    assert deleted == {"records:row/2": {"before": {"id": 2, "owner": "alice", "version": 1, "data": {"limit": 3}},
                                         "after": None}}


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_a_file_is_valued_by_size_digest_and_preview_never_its_bytes(semantics):
    spec = {"principals": ["alice"], "files": {"tree": {"/workspace/log.txt": "start\n"}}}
    big = "x" * 1_000_000
    with World(spec, semantics) as world:
        appended = _call(world, "write_file", path="log.txt", content=big, append=True)
        created = _call(world, "write_file", path="new.txt", content="hello")
    entry = appended["effects"]["values"]["files:/workspace/log.txt"]
    assert entry["before"]["size"] == 6 and entry["after"]["size"] == 1_000_006
    assert entry["delta"]["size"] == 1_000_000  # the bytes written
    assert entry["after"]["preview"].startswith("start\nxxx") and len(entry["after"]["preview"]) <= 120
    assert entry["before"]["sha256"] != entry["after"]["sha256"]
    assert len(json.dumps(appended["effects"])) < 2_000
    new = created["effects"]["values"]["files:/workspace/new.txt"]
    assert new["before"] is None and (new["after"]["kind"], new["after"]["size"], new["after"]["preview"]) == ("file", 5, "hello")


def test_values_cross_the_json_boundary_unchanged():
    with World(BANK, "real") as world:
        document = _call(world, "transfer_funds", **{"from": "a", "to": "b", "amount": 1})
    outcome = Outcome.from_dict(json.loads(json.dumps(document)))
    assert outcome.to_dict() == document
    assert outcome.effects.values["bank:account/b"]["delta"] == {"balance": 1}


def test_a_call_touching_more_resources_than_the_cap_keeps_every_id_and_values_some():
    rows = [{"id": i, "owner": "alice"} for i in range(MAX_VALUES + 10)]
    with World({"principals": ["alice"], "records": {"rows": rows}}, "stub") as world:
        effects = _call(world, "delete_records", filter="*")["effects"]
    assert effects["counts"]["deleted"] == MAX_VALUES + 10
    assert len(effects["values"]) == MAX_VALUES


# --- before-values are the world's before the call, whatever touched it earlier ---------------------------

_UPDATES = st.lists(
    st.tuples(st.sampled_from([1, 2, 3]), st.sampled_from(["n", "s"]), st.one_of(st.integers(-5, 5), st.text(max_size=3))),
    max_size=8,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(updates=_UPDATES, semantics=st.sampled_from(SEMANTICS))
def test_before_values_are_what_a_full_read_before_the_call_says(updates, semantics):
    spec = {"principals": ["alice"], "records": {"rows": [{"id": i, "owner": "alice", "data": {"n": i}} for i in (1, 2, 3)]}}
    with World(spec, semantics) as world:
        domain = world._domain("records")
        for row_id, field, value in updates:
            full_before = domain.values(list(domain.snapshot()))
            outcome = _call(world, "update_record", id=row_id, fields={field: value})
            if outcome["status"] == "error":  # a value the store refuses (a NUL) changes nothing
                assert outcome["effects"]["values"] == {}
                continue
            values = outcome["effects"]["values"]
            key = f"records:row/{row_id}"
            assert values[key]["before"] == full_before[key]
            assert values[key]["after"] == domain.values([key])[key]


# --- bounded previews ---------------------------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=MAX_STRING + 8),
    lambda inner: st.lists(inner, max_size=MAX_ITEMS + 2) | st.dictionaries(st.text(max_size=8), inner, max_size=MAX_ITEMS + 2),
    max_leaves=MAX_ITEMS + 8,
)


def _sizes_within_bounds(value, depth: int = MAX_DEPTH) -> bool:
    if isinstance(value, str):
        return len(value) <= MAX_STRING + len(f"{MORE}[+{10**7} chars]")
    if isinstance(value, list):
        return depth > 0 and len(value) <= MAX_ITEMS + 1 and all(_sizes_within_bounds(v, depth - 1) for v in value)
    if isinstance(value, dict):
        return depth > 0 and len(value) <= MAX_ITEMS + 1 and all(
            _sizes_within_bounds(k) and _sizes_within_bounds(v, depth - 1) for k, v in value.items())
    return True


@pytest.mark.slow
@settings(max_examples=100, deadline=None)
@given(_JSON)
def test_bounded_values_are_json_within_their_limits_and_small_values_are_kept(value):
    cut = bounded(value)
    assert json.loads(json.dumps(cut)) == cut
    assert _sizes_within_bounds(cut)
    if len(json.dumps(value)) < MAX_STRING and _sizes_within_bounds(value, MAX_DEPTH) and MORE not in json.dumps(value):
        assert cut == value


def test_a_cut_says_so_in_place():
    assert bounded("y" * (MAX_STRING + 5)).endswith(f"{MORE}[+5 chars]")
    assert bounded(list(range(MAX_ITEMS + 3)))[-1] == f"{MORE}[+3 items]"
    assert bounded({str(i): i for i in range(MAX_ITEMS + 2)})[MORE] == "+2 keys"


@given(st.integers() | st.floats(allow_nan=False, allow_infinity=False), st.integers() | st.floats(allow_nan=False, allow_infinity=False))
def test_delta_of_numbers_is_after_minus_before(before, after):
    assert delta(before, after) == after - before
    assert delta({"x": before, "s": "a"}, {"x": after, "s": "b", "new": 1}) == {"x": after - before}


def test_delta_is_none_when_nothing_compares():
    assert delta(None, {"balance": 3}) is None
    assert delta("a", "b") is None
    assert delta(True, False) is None
    assert delta({"a": "x"}, {"a": "y"}) is None


def test_effects_without_values_still_read_as_before():
    legacy = {"created": ["x"], "changed": [], "deleted": [], "counts": {"created": 1, "changed": 0, "deleted": 0, "total": 1}}
    effects = Effects.from_dict(legacy)
    assert effects.values == {} and effects.created == ("x",)
