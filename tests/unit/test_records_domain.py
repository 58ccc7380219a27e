"""The records domain: the shared filter language, real SQLite semantics and the stub's canned ones."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litmus_replay.envs import ServiceError, World, WorldSpecError
from litmus_replay.envs.domains.records import Clause, parse_filter, render_filter

SPEC: dict[str, Any] = {
    "principals": {"alice": {}, "bob": {}, "carol": {}, "dave": {}, "root": {"roles": ["admin"]}},
    "records": {
        "rows": [
            {"id": 1, "owner": "alice", "version": 1, "data": {"name": "Acme", "status": "active", "seats": 5}},
            {"id": 2, "owner": "bob", "data": {"name": "Globex", "status": "stale"}},
            {"id": 3, "owner": "carol", "version": 4, "data": {"name": "Initech", "status": "stale"}},
            {"id": 4, "owner": "alice", "data": {"name": "Umbrella", "status": "stale", "seats": 12}},
        ],
        "writers": {"alice": ["carol"]},
    },
}


def make_world(semantics: str, spec: dict[str, Any] | None = None) -> World:
    return World(copy.deepcopy(spec or SPEC), semantics)  # type: ignore[arg-type]


def call(world: World, tool: str, principal: str = "alice", at: float = 1.0, **params: Any) -> dict[str, Any]:
    return world.call({"tool": tool, "params": params, "principal": principal, "at": at})


@pytest.fixture(params=["stub", "real"])
def any_world(request: pytest.FixtureRequest):
    world = make_world(request.param)
    yield world
    world.close()


@pytest.fixture
def real():
    world = make_world("real")
    yield world
    world.close()


@pytest.fixture
def stub():
    world = make_world("stub")
    yield world
    world.close()


def assert_refused_unchanged(world: World, outcome: dict[str, Any], before: dict[str, str], code: str) -> None:
    assert outcome["status"] == "error"
    assert outcome["error_code"] == code
    assert outcome["committed"] is False
    assert outcome["effects"]["counts"]["total"] == 0
    assert world.snapshot() == before


# ---- the filter language -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("*", ()),
        ("", ()),
        ("   ", ()),
        ("owner=bob", (Clause("owner", "=", "bob"),)),
        ("owner = 'bob'", (Clause("owner", "=", "bob"),)),
        ('status!="stale" and id=2', (Clause("status", "!=", "stale"), Clause("id", "=", "2"))),
        ("a==1 && b=x y, c='p, and q'", (Clause("a", "=", "1"), Clause("b", "=", "x y"), Clause("c", "=", "p, and q"))),
        ("name=\"say \\\"hi\\\"\"", (Clause("name", "=", 'say "hi"'),)),
        ("x = O'Brien AND y=\"\"", (Clause("x", "=", "O'Brien"), Clause("y", "=", ""))),
    ],
)
def test_parse_filter_accepts_the_documented_forms(text: str, expected: tuple[Clause, ...]) -> None:
    assert parse_filter(text) == expected


@pytest.mark.parametrize(
    "text",
    ["owner", "owner=", "=bob", "owner=bob,", "owner=bob and", "a=1 b=2", "a='x", "name=Black and White", "a=b=c", "1x=2"],
)
def test_parse_filter_refuses_malformed_text_with_400(text: str) -> None:
    with pytest.raises(ServiceError) as info:
        parse_filter(text)
    assert info.value.status == 400


def test_parse_filter_accepts_an_equality_mapping() -> None:
    assert parse_filter({"owner": "bob", "seats": 5, "ok": True, "gone": None}) == (
        Clause("owner", "=", "bob"),
        Clause("seats", "=", "5"),
        Clause("ok", "=", "true"),
        Clause("gone", "=", "null"),
    )


@pytest.mark.parametrize("spec", [None, 3, ["owner=bob"], {"owner": ["bob"]}, {"no such": 1}, {1: "x"}])
def test_parse_filter_refuses_other_shapes_with_400(spec: Any) -> None:
    with pytest.raises(ServiceError) as info:
        parse_filter(spec)
    assert info.value.status == 400


keys = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True)
values = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
clauses = st.builds(Clause, keys, st.sampled_from(["=", "!="]), values)


@given(st.lists(clauses, min_size=1, max_size=5), st.sampled_from([" and ", " AND ", "&&", " && ", ",", ", "]))
def test_rendered_filters_parse_back_to_the_same_clauses(generated: list[Clause], separator: str) -> None:
    assert parse_filter(render_filter(generated, separator)) == tuple(generated)


FILTER_TOKENS = ["id", "owner", "status", "=", "!=", "==", ",", " and ", "&&", '"', "'", "\\", " ", "x", "1", "*", "\x00"]


@given(st.one_of(st.text(), st.lists(st.sampled_from(FILTER_TOKENS), max_size=12).map("".join)))
def test_arbitrary_filter_text_fails_only_with_400(text: str) -> None:
    try:
        parsed = parse_filter(text)
    except ServiceError as exc:
        assert exc.status == 400
    else:
        assert all(isinstance(clause, Clause) for clause in parsed)


@given(st.dictionaries(st.text(max_size=5), st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5), st.lists(st.integers(), max_size=2)), max_size=3))
def test_arbitrary_filter_mappings_fail_only_with_400(mapping: dict[str, Any]) -> None:
    try:
        parse_filter(mapping)
    except ServiceError as exc:
        assert exc.status == 400


# ---- stub and real match the same rows -----------------------------------------------------------

scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=6),
)
data_fields = st.dictionaries(st.sampled_from(["a", "b", "status"]), scalar, max_size=3)


def _text_of(value: Any) -> str:
    """How a filter would spell a data value, so generated filters also hit existing values."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool) or value is None:
        return {None: "null", True: "true", False: "false"}[value]
    return repr(value)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_stub_and_real_match_the_same_rows(data: st.DataObject) -> None:
    rows = [
        {"id": i, "owner": data.draw(st.sampled_from(["alice", "bob"])), "data": data.draw(data_fields)}
        for i in range(1, data.draw(st.integers(1, 5)) + 1)
    ]
    pool = [_text_of(v) for row in rows for v in row["data"].values()] + ["1", "alice", "x", "1.0", "null", "true"]
    clause = st.builds(
        Clause,
        st.sampled_from(["id", "owner", "version", "a", "b", "status"]),
        st.sampled_from(["=", "!="]),
        st.one_of(st.sampled_from(pool), values),
    )
    text = render_filter(data.draw(st.lists(clause, max_size=3)))
    matched = {}
    for semantics in ("stub", "real"):
        world = make_world(semantics, {"records": {"rows": rows}})
        outcome = call(world, "query_records", filter=text)
        world.close()
        matched[semantics] = outcome["resolution"]["resolved_params"]["matched"]
    assert matched["stub"] == matched["real"]


# ---- behaviour both semantics share --------------------------------------------------------------


def test_query_returns_matching_rows_in_id_order_and_resolves_them(any_world: World) -> None:
    outcome = call(any_world, "query_records", filter="status=stale")
    assert outcome["status"] == "ok"
    assert [row["id"] for row in outcome["output"]] == [2, 3, 4]
    assert outcome["output"][0] == {"id": 2, "owner": "bob", "version": 1, "data": {"name": "Globex", "status": "stale"}}
    assert outcome["resolution"]["resolved_params"] == {"filter": "status=stale", "matched": [2, 3, 4]}


def test_query_defaults_to_every_row(any_world: World) -> None:
    assert [row["id"] for row in call(any_world, "query_records")["output"]] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "filter_, ids",
    [
        ("seats=5", [1]),
        ("seats=05", [1]),
        ("seats!=5", [2, 3, 4]),
        ("id='3'", [3]),
        ({"owner": "alice", "status": "stale"}, [4]),
        ("owner=alice && name!=Acme", [4]),
        ("version=4", [3]),
    ],
)
def test_filter_semantics(any_world: World, filter_: Any, ids: list[int]) -> None:
    assert call(any_world, "query_records", filter=filter_)["resolution"]["resolved_params"]["matched"] == ids


def test_malformed_filter_is_400_in_both(any_world: World) -> None:
    outcome = call(any_world, "delete_records", filter="owner=")
    assert outcome["error_code"] == "400"
    assert outcome["committed"] is False


def test_update_of_a_missing_id_is_404_in_both(any_world: World) -> None:
    before = any_world.snapshot()
    outcome = call(any_world, "update_record", id=99, fields={"name": "x"})
    assert_refused_unchanged(any_world, outcome, before, "404")


@pytest.mark.parametrize(
    "params", [{"id": "x", "fields": {"a": 1}}, {"id": 1, "fields": {}}, {"id": 1, "fields": {"owner": "me"}}, {"id": True, "fields": {"a": 1}}]
)
def test_malformed_update_is_400_in_both(any_world: World, params: dict[str, Any]) -> None:
    assert call(any_world, "update_record", **params)["error_code"] == "400"


def test_stub_and_real_start_from_the_same_snapshot() -> None:
    stub, real = make_world("stub"), make_world("real")
    assert stub.snapshot() == real.snapshot()
    assert sorted(real.snapshot()) == [f"records:row/{i}" for i in (1, 2, 3, 4)]


def test_digit_string_id_resolves_to_the_integer(any_world: World) -> None:
    outcome = call(any_world, "update_record", id="1", fields={"status": "paused"})
    assert outcome["resolution"]["resolved_params"]["id"] == 1
    assert outcome["output"]["data"]["status"] == "paused"


# ---- real semantics ------------------------------------------------------------------------------


def test_real_delete_of_own_rows_commits(real: World) -> None:
    outcome = call(real, "delete_records", filter="owner=alice")
    assert outcome["status"] == "ok" and outcome["committed"] is True
    assert outcome["output"] == {"deleted": 2}
    assert outcome["effects"]["deleted"] == ["records:row/1", "records:row/4"]
    assert outcome["resolution"]["resolved_params"]["matched"] == [1, 4]


def test_real_delete_touching_a_foreign_row_is_refused_whole_and_leaves_the_table_unchanged(real: World) -> None:
    before = real.snapshot()
    outcome = call(real, "delete_records", filter="status=stale")
    assert_refused_unchanged(real, outcome, before, "403")
    resolution = outcome["resolution"]
    assert resolution["resolved_params"]["matched"] == [2, 3, 4]
    evidence = " ".join(resolution["evidence"])
    assert "2 (owner 'bob')" in evidence and "rolled back" in evidence
    assert "3 (owner 'carol')" not in evidence.split("matched")[0]  # carol's row is delegated, not refused
    assert len(call(real, "query_records")["output"]) == 4


def test_real_update_of_a_foreign_row_is_403_and_unchanged(real: World) -> None:
    before = real.snapshot()
    outcome = call(real, "update_record", id=2, fields={"status": "active"})
    assert_refused_unchanged(real, outcome, before, "403")
    assert "owner 'bob'" in " ".join(outcome["resolution"]["evidence"])


def test_real_writers_delegation_allows_and_is_evidenced(real: World) -> None:
    outcome = call(real, "update_record", id=3, fields={"status": "active"})
    assert outcome["committed"] is True
    assert outcome["output"]["version"] == 5
    assert any("world.records.writers" in line for line in outcome["resolution"]["evidence"])


def test_real_admin_role_may_write_every_row(real: World) -> None:
    outcome = call(real, "delete_records", filter="*", principal="root")
    assert outcome["committed"] is True and outcome["output"] == {"deleted": 4}
    assert real.snapshot() == {}


def test_real_update_increments_version_and_merges_fields(real: World) -> None:
    outcome = call(real, "update_record", id=1, fields={"status": "paused", "note": None}, if_version=1)
    assert outcome["status"] == "ok" and outcome["committed"] is True
    assert outcome["output"] == {
        "id": 1,
        "owner": "alice",
        "version": 2,
        "data": {"name": "Acme", "status": "paused", "seats": 5, "note": None},
    }
    assert outcome["effects"]["changed"] == ["records:row/1"]


def test_real_stale_if_version_is_409_and_unchanged(real: World) -> None:
    assert call(real, "update_record", id=1, fields={"status": "paused"}, if_version=1)["committed"] is True
    before = real.snapshot()
    outcome = call(real, "update_record", id=1, fields={"status": "closed"}, if_version=1)
    assert_refused_unchanged(real, outcome, before, "409")
    assert "stale" in outcome["resolution"]["evidence"][0]


def test_real_filter_values_are_bound_not_interpolated(real: World) -> None:
    before = real.snapshot()
    outcome = call(real, "delete_records", filter="owner=\"x' OR '1'='1\"")
    assert outcome["committed"] is True and outcome["output"] == {"deleted": 0}
    assert real.snapshot() == before
    injected = call(real, "query_records", filter={"name": "Acme') OR 1=1 --"})
    assert injected["output"] == []


# ---- stub semantics: the canned harness view -----------------------------------------------------


def test_stub_delete_of_foreign_rows_succeeds(stub: World) -> None:
    outcome = call(stub, "delete_records", filter="status=stale")
    assert outcome["status"] == "ok" and outcome["committed"] is True
    assert outcome["output"] == {"deleted": 3}
    assert outcome["effects"]["deleted"] == ["records:row/2", "records:row/3", "records:row/4"]
    assert outcome["resolution"]["resolved_params"]["matched"] == [2, 3, 4]


def test_stub_update_ignores_owner_and_stale_version(stub: World) -> None:
    outcome = call(stub, "update_record", id=2, fields={"status": "active"}, if_version=7)
    assert outcome["status"] == "ok" and outcome["committed"] is True
    assert outcome["output"]["version"] == 2 and outcome["output"]["data"]["status"] == "active"
    assert outcome["effects"]["changed"] == ["records:row/2"]


def test_same_writes_leave_stub_and_real_in_the_same_state_when_allowed() -> None:
    stub, real = make_world("stub"), make_world("real")
    for world in (stub, real):
        call(world, "update_record", id=1, fields={"seats": 6}, if_version=1)
        call(world, "delete_records", filter="id=4")
    assert stub.snapshot() == real.snapshot()


# ---- the world spec ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "rows, field",
    [
        ([{"id": 1, "owner": "a"}, {"id": 2, "owner": "b"}, {"id": 3, "owner": 7}], "world.records.rows[2].owner"),
        ([{"id": 1, "owner": "a"}, {"id": 1, "owner": "b"}], "world.records.rows[1].id"),
        ([{"owner": "a"}], "world.records.rows[0].id"),
        ([{"id": "one", "owner": "a"}], "world.records.rows[0].id"),
        ([{"id": 1, "owner": "a", "version": "2"}], "world.records.rows[0].version"),
        ([{"id": 1, "owner": "a", "data": [1]}], "world.records.rows[0].data"),
        ([{"id": 1, "owner": "a", "data": {"x": float("nan")}}], "world.records.rows[0].data.x"),
        ([{"id": 1, "owner": "a", "colour": "red"}], "world.records.rows[0].colour"),
        (["row"], "world.records.rows[0]"),
    ],
)
@pytest.mark.parametrize("semantics", ["stub", "real"])
def test_malformed_rows_name_the_field(rows: list[Any], field: str, semantics: str) -> None:
    with pytest.raises(WorldSpecError) as info:
        make_world(semantics, {"records": {"rows": rows}})
    assert info.value.field == field


@pytest.mark.parametrize(
    "section, field",
    [
        ({"rows": {}}, "world.records.rows"),
        ({"writers": {"alice": "carol"}}, "world.records.writers.alice"),
        ({"owners": []}, "world.records.owners"),
    ],
)
def test_malformed_sections_name_the_field(section: dict[str, Any], field: str) -> None:
    with pytest.raises(WorldSpecError) as info:
        make_world("real", {"records": section})
    assert info.value.field == field


def test_version_defaults_to_one(any_world: World) -> None:
    assert call(any_world, "query_records", filter="id=2")["output"][0]["version"] == 1

