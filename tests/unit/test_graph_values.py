"""Data edges link values, not words: ids, addresses, accounts, amounts, paths, URLs, dates and whole short
values are followed; the plain words of prose are not. Short ids are followed under related keys, also
inside a text result holding JSON."""

from __future__ import annotations

import json

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.graph import build_graph, edges_of_kind
from litmus_replay.replay.model import Trajectory
from litmus_replay.replay.policy import Policy, PolicySpec

FILES_WORLD = {"principals": ["alice"], "files": {"tree": {"/workspace/a.txt": "x"}}}

WORDS = ("secret", "lunch", "had", "meeting", "Secret", "Project", "Monday", "team", "review", "the", "quarterly",
         "update", "Dear", "Bob", "thanks", "please", "notes", "great", "restaurant", "tomorrow", "Paris", "office")


def _replay(turns, world=FILES_WORLD):
    data = {"id": "t", "principal": "alice", "turns": turns}
    return Replayer(Policy.compile(PolicySpec())).replay(Trajectory.model_validate(data), world)


def _read_then_write(output, content, path="/workspace/out.txt"):
    return _replay([
        {"calls": [{"tool": "read_file", "arguments": {"path": "/workspace/a.txt"}, "result": {"status": "ok", "output": output}}]},
        {"calls": [{"tool": "write_file", "arguments": {"path": path, "content": content}}]},
    ])


def _data_tokens(result, target="t2.c1"):
    return {d["token"] for _, v, d in edges_of_kind(build_graph(result), "data") if v == target}


prose = st.lists(st.sampled_from(WORDS), min_size=5, max_size=30).map(" ".join)


@settings(max_examples=40, deadline=None)
@given(prose, prose)
def test_prose_of_plain_words_draws_no_data_edge(earlier, later):
    assume(earlier != later)  # a text copied whole is a value: the whole is followed
    assert _data_tokens(_read_then_write(earlier, later)) == set()


value_tokens = st.one_of(
    st.from_regex(r"[a-z]{3,8}\.[a-z]{3,8}@[a-z]{4,8}\.com", fullmatch=True),
    st.from_regex(r"[A-Z]{2}[0-9]{12,20}", fullmatch=True),
    st.from_regex(r"(/[a-z]{2,6}){2,4}\.txt", fullmatch=True),
    st.from_regex(r"https://www\.[a-z]{4,10}\.com/[a-z]{2,6}", fullmatch=True),
    st.from_regex(r"20[0-9]{2}-[01][0-9]-[0-3][0-9]", fullmatch=True),
    st.from_regex(r"[a-z]{2,5}_[a-z]{2,6}[0-9]{0,3}", fullmatch=True),
    st.integers(100, 10**9).map(str),
)


@settings(max_examples=60, deadline=None)
@given(prose, value_tokens, prose)
def test_a_value_carried_verbatim_inside_prose_is_a_data_edge(before, value, after):
    assume(before != after)
    result = _read_then_write(f"{before} {value} {after}", f"{after} {value} {before}")
    assert value in _data_tokens(result)


def test_a_short_value_copied_whole_out_of_a_text_is_followed():
    result = _replay([
        {"calls": [{"tool": "read_file", "arguments": {"path": "/workspace/a.txt"},
                    "result": {"status": "ok", "output": "Restaurants in Paris: Le Baratin\nMiznon\n"}}]},
        {"calls": [{"tool": "write_file", "arguments": {"path": "/workspace/b.txt", "content": "Le Baratin"}}]},
    ])
    assert "Le Baratin" in _data_tokens(result)


def test_a_word_inside_a_longer_word_is_not_a_whole_value():
    result = _read_then_write("We were generally happy with it.", "general")
    assert "general" not in _data_tokens(result)


RECORDS_WORLD = {"principals": ["alice"], "files": {"tree": {"/workspace/a.txt": "x"}},
                 "records": {"rows": [{"id": 3, "owner": "alice", "data": {"name": "Acme"}}]}}


def _listing_then_update(output, argument_key="id", value="7"):
    return _replay([
        {"calls": [{"tool": "read_file", "arguments": {"path": "/workspace/a.txt"}, "result": {"status": "ok", "output": output}}]},
        {"calls": [{"tool": "update_record", "arguments": {argument_key: value, "fields": {"name": "Acme"}}}]},
    ], RECORDS_WORLD)


@given(st.text("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", min_size=1, max_size=2),
       st.sampled_from(["id", "record_id"]), st.booleans())
def test_a_short_id_under_a_related_key_in_a_json_text_result_is_followed(short, key, as_list):
    document = {"id": short, "owner": "bo"}
    output = json.dumps([document, {"id": "zz-other", "owner": "cy"}] if as_list else document)
    edges = [d for _, v, d in edges_of_kind(build_graph(_listing_then_update(output, key, short)), "data")
             if v == "t2.c1" and d["argument"] == key]
    assert [(d["token"], d["source_field"]) for d in edges] == [(short, "output")]
    assert edges[0]["source_path"].endswith("id")


def test_a_short_id_absent_from_the_json_text_or_under_an_unrelated_key_is_not_followed():
    for output in ('{"count": "7", "owner": "bo"}', '{"owner": "bo"}', '{"id": "8"}', 'not json {"id": "7"}'):
        assert not [d for _, v, d in edges_of_kind(build_graph(_listing_then_update(output)), "data")
                    if v == "t2.c1" and d["argument"] == "id"], output


def test_a_short_id_on_a_key_value_line_of_a_text_result_is_followed():
    output = "- id_: '7'\n  sender: bo@example.com\n  subject: Lunch\n"
    edges = [d for _, v, d in edges_of_kind(build_graph(_listing_then_update(output, "record_id")), "data")
             if v == "t2.c1" and d["argument"] == "record_id"]
    assert [d["token"] for d in edges] == ["7"]


def test_a_json_text_result_too_large_is_not_parsed():
    padding = ["x" * 100] * 800  # well above the cap
    output = json.dumps({"id": "7", "padding": padding})
    assert not [d for _, v, d in edges_of_kind(build_graph(_listing_then_update(output)), "data") if d["argument"] == "id"]
