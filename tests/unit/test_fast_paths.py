"""Routines made cheaper for the per-call path give the same answers as the general ones they replaced:
bounded previews, snapshot diffs, record digests, and the digests a table keeps across writes."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litmus_replay.envs import World
from litmus_replay.envs.domains import records
from litmus_replay.envs.errors import WorldSpecError
from litmus_replay.envs.outcome import Effects
from litmus_replay.envs.values import MAX_DEPTH, MAX_ITEMS, MAX_STRING, MORE, bounded, json_copy


def _bounded_reference(value: Any, *, max_items: int = MAX_ITEMS, depth: int = MAX_DEPTH) -> Any:
    """``bounded`` as it was written before its fast paths: one isinstance chain for every value."""
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return value if len(value) <= MAX_STRING else f"{value[:MAX_STRING]}{MORE}[+{len(value) - MAX_STRING} chars]"
    if isinstance(value, Mapping):
        if depth <= 0:
            return f"{MORE}[{len(value)} keys]"
        items = list(value.items())
        out = {_bounded_reference(str(key)): _bounded_reference(item, depth=depth - 1) for key, item in items[:max_items]}
        if len(items) > max_items:
            out[MORE] = f"+{len(items) - max_items} keys"
        return out
    if isinstance(value, (list, tuple)):
        if depth <= 0:
            return f"{MORE}[{len(value)} items]"
        out_list = [_bounded_reference(item, depth=depth - 1) for item in value[:max_items]]
        if len(value) > max_items:
            out_list.append(f"{MORE}[+{len(value) - max_items} items]")
        return out_list
    return _bounded_reference(str(value))


class _Label(str):
    """A str subclass, as an enum's value is: not the exact type the fast path takes."""


_KEYS = st.text(max_size=6) | st.text(min_size=MAX_STRING - 2, max_size=MAX_STRING + 3) | st.integers() | st.booleans() \
    | st.none() | st.floats(allow_nan=True) | st.builds(_Label, st.text(max_size=4))
_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=MAX_STRING + 8) \
    | st.builds(_Label, st.text(max_size=4)) | st.binary(max_size=4)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=MAX_ITEMS + 2) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(_KEYS, inner, max_size=MAX_ITEMS + 2),
    max_leaves=MAX_ITEMS + 12,
)


def _same(one: Any, other: Any) -> bool:
    """Equal and of the same types all the way down (1 == True == 1.0 would hide a change of type)."""
    return json.dumps(one, sort_keys=False, default=repr) == json.dumps(other, sort_keys=False, default=repr) \
        and repr(one) == repr(other)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(_VALUES, st.integers(min_value=0, max_value=MAX_ITEMS + 2), st.integers(min_value=0, max_value=MAX_DEPTH + 1))
def test_bounded_gives_what_the_general_routine_gave(value, max_items, depth):
    assert _same(bounded(value, max_items=max_items, depth=depth), _bounded_reference(value, max_items=max_items, depth=depth))


def _between_reference(before: Mapping[str, str], after: Mapping[str, str]) -> Effects:
    return Effects(
        created=tuple(sorted(k for k in after if k not in before)),
        changed=tuple(sorted(k for k in after if k in before and before[k] != after[k])),
        deleted=tuple(sorted(k for k in before if k not in after)),
    )


_SNAPSHOTS = st.dictionaries(st.sampled_from([f"r:{i}" for i in range(8)]), st.sampled_from("abc"), max_size=8)


@given(_SNAPSHOTS, _SNAPSHOTS)
def test_a_diff_of_snapshots_is_what_three_passes_gave(before, after):
    assert Effects.between(before, after) == _between_reference(before, after)
    assert Effects.between(before, dict(before)).empty


_ROW_DATA = st.dictionaries(st.text(max_size=5), st.none() | st.booleans() | st.integers(-2**63, 2**63 - 1)
                            | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=6), max_size=4)


@given(st.text(max_size=6), st.integers(-2**63, 2**63 - 1), _ROW_DATA)
def test_a_stored_rows_digest_is_the_digest_of_its_data(owner, version, data):
    text = records._canonical(data)
    assert records._stored_digest(owner, version, text) == records._digest(owner, version, json.loads(text))


def _full_digests(world: World) -> dict[str, str]:
    """Every row's digest computed afresh from the table as it stands."""
    domain = world._domain("records")
    return {f"records:row/{row['id']}": records._digest(row["owner"], row["version"], row["data"]) for row in domain._rows()}


_WRITES = st.lists(
    st.one_of(
        st.builds(lambda i, v: ("update_record", {"id": i, "fields": {"n": v}}), st.integers(1, 4), st.integers(0, 3)),
        st.builds(lambda i: ("delete_records", {"filter": f"id={i}"}), st.integers(1, 4)),
        st.builds(lambda i: ("query_records", {"filter": f"id={i}"}), st.integers(1, 4)),
    ),
    max_size=8,
)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["stub", "real"]), _WRITES)
def test_a_tables_kept_digests_are_those_computed_afresh_after_any_writes(semantics, writes):
    spec = {"principals": ["alice"],
            "records": {"rows": [{"id": i, "owner": "alice", "data": {"n": 0}} for i in range(1, 5)]}}
    with World(spec, semantics) as world:
        for tool, params in writes:
            world.call({"tool": tool, "params": params, "principal": "alice"})
            assert world.snapshot() == _full_digests(world)


def _rows_world(data: dict) -> dict:
    return {"principals": ["alice"], "records": {"rows": [{"id": 1, "owner": "alice", "data": data}]}}


@pytest.mark.parametrize("semantics", ["stub", "real"])
def test_a_rows_section_met_before_is_told_from_one_that_differs_only_in_types(semantics):
    with World(_rows_world({"1": "x", "n": 1}), semantics) as world:
        first = json.dumps(world.call({"tool": "query_records", "params": {}, "principal": "alice"})["output"])
    with World(_rows_world({"1": "x", "n": True}), semantics) as world:
        second = json.dumps(world.call({"tool": "query_records", "params": {}, "principal": "alice"})["output"])
        assert second == first.replace('"n": 1', '"n": true')
    with pytest.raises(WorldSpecError, match="field names must be strings"):
        World(_rows_world({1: "x", "n": 1}), semantics)


def test_a_real_table_copied_from_one_loaded_before_takes_writes_as_a_new_one():
    spec = _rows_world({"n": 0})
    answers = []
    for _ in range(2):  # the second world starts from the first one's image
        with World(spec, "real") as world:
            calls = [("update_record", {"id": 1, "fields": {"n": 5}}), ("query_records", {"filter": "n=5"}),
                     ("delete_records", {"filter": "*"})]
            answers.append([world.call({"tool": tool, "params": params, "principal": "alice"}) for tool, params in calls])
            assert world.snapshot() == {}
    assert answers[0] == answers[1]


_ODD_KEYS = st.integers() | st.booleans() | st.none() | st.floats() | st.builds(_Label, st.text(max_size=4))
_JSONISH = st.recursive(
    _SCALARS | st.floats(allow_nan=True, allow_infinity=True) | st.builds(lambda n: n, st.just(object)),
    lambda inner: st.lists(inner, max_size=4) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(st.text(max_size=4) | _ODD_KEYS, inner, max_size=4),
    max_leaves=20,
)


def _json_copy_reference(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


@settings(max_examples=300, deadline=None)
@given(_JSONISH)
def test_a_json_copy_is_what_encoding_and_decoding_gave(value):
    copied = json_copy(value)
    expected = _json_copy_reference(value)
    assert json.dumps(copied, sort_keys=False) == json.dumps(expected, sort_keys=False)
    assert repr(copied) == repr(expected)


def test_a_json_copy_shares_no_container_with_the_value():
    value = {"rows": [{"id": 1, "tags": ["a"]}], "pair": (1, 2)}
    copied = json_copy(value)
    copied["rows"][0]["tags"].append("b")
    assert value == {"rows": [{"id": 1, "tags": ["a"]}], "pair": (1, 2)}
    assert copied["pair"] == [1, 2]


def test_a_value_json_cannot_take_fails_as_it_did():
    for value in ({(1, 2): "tuple key"}, [float("nan")]):
        try:
            expected: Any = _json_copy_reference(value)
        except TypeError as exc:
            with pytest.raises(TypeError, match=str(exc)):
                json_copy(value)
        else:
            assert repr(json_copy(value)) == repr(expected)
