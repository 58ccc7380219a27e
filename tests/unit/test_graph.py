"""The causal graph: data edges with spans (including decoded pieces), state edges from writers and the
initial state, divergence edges, and counterfactual marking carried downstream."""

from __future__ import annotations

import base64

from hypothesis import given
from hypothesis import strategies as st

from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.graph import WORLD_NODE, build_graph, counterfactual_nodes, edges_of_kind, tokens_of
from litmus_replay.replay.model import Trajectory
from litmus_replay.replay.policy import Policy, PolicySpec

RECORDS_WORLD = {
    "principals": ["alice"],
    "records": {"rows": [{"id": 1, "owner": "alice", "data": {"name": "Acme"}},
                         {"id": 2, "owner": "alice", "data": {"name": "Globex"}}]},
}


def _replay(world, turns, principal="alice"):
    trajectory = Trajectory.model_validate({"id": "t", "principal": principal, "turns": turns})
    return Replayer(Policy.compile(PolicySpec())).replay(trajectory, world)


def test_an_argument_carried_from_an_earlier_output_is_a_data_edge_with_its_span():
    result = _replay(RECORDS_WORLD, [
        {"calls": [{"tool": "query_records", "arguments": {"filter": "*"}}]},
        {"calls": [{"tool": "delete_records", "arguments": {"filter": "name=Globex"}}]},
    ])
    graph = build_graph(result)
    (edge,) = [(u, v, d) for u, v, d in edges_of_kind(graph, "data") if d["token"] == "Globex"]
    assert edge[:2] == ("t1.c1", "t2.c1")
    assert edge[2]["argument"] == "filter" and edge[2]["span"] == [5, 11] and edge[2]["source_field"] == "output"


def test_state_edges_come_from_the_last_writer_or_the_initial_state():
    result = _replay(RECORDS_WORLD, [
        {"calls": [{"tool": "update_record", "arguments": {"id": 1, "fields": {"name": "Acme2"}}}]},
        {"calls": [{"tool": "query_records", "arguments": {"filter": "*"}}]},
    ])
    graph = build_graph(result)
    state = {(u, v, d["resource"], d["world"]) for u, v, d in edges_of_kind(graph, "state")}
    assert (WORLD_NODE, "t1.c1", "records:row/1", "real") in state
    assert ("t1.c1", "t2.c1", "records:row/1", "real") in state
    assert (WORLD_NODE, "t2.c1", "records:row/2", "real") in state


def test_a_recorded_output_the_real_world_does_not_give_makes_later_calls_counterfactual():
    result = _replay(RECORDS_WORLD, [
        {"calls": [{"tool": "query_records", "arguments": {"filter": "*"},
                    "result": {"status": "ok", "output": [{"id": 1, "data": {"name": "Initech-42"}}]}}]},
        {"calls": [{"tool": "delete_records", "arguments": {"filter": "name=Initech-42"}}]},
        {"calls": [{"tool": "query_records", "arguments": {"filter": "*"}}]},
        {"calls": [{"tool": "update_record", "arguments": {"id": 2, "fields": {"name": "Unrelated"}}}]},
    ])
    graph = build_graph(result)
    (divergence,) = edges_of_kind(graph, "divergence")
    assert divergence[:2] == ("t1.c1", "t2.c1") and divergence[2]["token"] == "Initech-42"
    assert graph.nodes["t1.c1"]["divergent"]
    assert "t2.c1" in counterfactual_nodes(graph)
    assert "t1.c1" not in counterfactual_nodes(graph)


def test_a_symlink_made_earlier_links_the_call_that_follows_it():
    world = {"principals": ["alice"], "files": {"tree": {"/workspace/a": "x"}, "canaries": {"/home/alice/k": "K"}}}
    result = _replay(world, [
        {"calls": [{"tool": "make_symlink", "arguments": {"target": "/home/alice", "link_path": "/workspace/h"}}]},
        {"calls": [{"tool": "read_file", "arguments": {"path": "/workspace/h/k"}}]},
    ])
    graph = build_graph(result)
    state = {(u, v, d["resource"]) for u, v, d in edges_of_kind(graph, "state") if d["world"] == "real"}
    assert ("t1.c1", "t2.c1", "files:/workspace/h") in state
    assert (WORLD_NODE, "t2.c1", "files:/home/alice/k") in state


secrets = st.text(st.characters(min_codepoint=48, max_codepoint=122).filter(str.isalnum), min_size=6, max_size=20)


@given(secrets, st.sampled_from(["base64", "url"]))
def test_decoded_pieces_are_followed(secret, transform):
    secret = f"tok{secret}"
    if transform == "base64":
        encoded = base64.b64encode(f"key={secret}".encode()).decode()
    else:  # every byte percent-encoded: the secret is visible only once decoded
        encoded = "q=" + "".join(f"%{byte:02X}" for byte in secret.encode())
    world = {"principals": ["alice"], "profiles": {"alice": {"note": secret}}, "sessions": {"s": "alice"}, "session": "s"}
    result = _replay(world, [
        {"calls": [{"tool": "get_profile", "arguments": {}}]},
        {"calls": [{"tool": "update_profile", "arguments": {"field": "bio", "value": encoded}}]},
    ])
    graph = build_graph(result)
    pieces = [d for _, v, d in edges_of_kind(graph, "data") if v == "t2.c1" and d["token"] == secret]
    assert pieces and pieces[0]["transform"] == transform


def test_tokens_of_keeps_paths_their_value_parts_and_numbers_but_not_plain_words():
    # "srv" and "app" are plain words: a later argument reaches them through the path's prefixes instead.
    tokens = {p.token for p in tokens_of({"path": "/srv/app/config.yaml", "amount": 2400.0, "n": 7, "ok": True})}
    assert tokens == {"/srv/app/config.yaml", "config.yaml", "2400"}


def test_a_failed_write_that_a_later_call_relied_on_is_linked_in_the_stub_world_too():
    world = {"principals": ["alice"], "files": {"tree": {"/workspace/a.txt": "x"}}}
    result = _replay(world, [
        {"calls": [{"tool": "write_file", "arguments": {"path": "/workspace/a.txt", "content": "new"},
                    "result": {"status": "error", "error": "disk full"}}]},
        {"calls": [{"tool": "read_file", "arguments": {"path": "/workspace/a.txt"}}]},
    ])
    graph = build_graph(result)
    worlds = {d["world"] for u, v, d in edges_of_kind(graph, "state") if (u, v) == ("t1.c1", "t2.c1")}
    assert worlds == {"real", "stub"}


def test_a_token_the_call_was_given_and_echoed_back_is_not_a_divergence():
    world = {"principals": ["alice"], "files": {"tree": {}}}
    result = _replay(world, [
        {"calls": [{"tool": "write_file", "arguments": {"path": "/workspace/report-2291.txt", "content": "x"},
                    "result": {"status": "ok", "output": {"path": "/workspace/report-2291.txt", "bytes": 1}}}]},
        {"calls": [{"tool": "read_file", "arguments": {"path": "/workspace/report-2291.txt"}}]},
    ])
    graph = build_graph(result)
    assert edges_of_kind(graph, "divergence") == []
    assert [d["source_field"] for u, v, d in edges_of_kind(graph, "data") if d["token"] == "/workspace/report-2291.txt"] == ["arguments"]


@given(st.sampled_from([0, 4, 9, "7", "B2", "x"]), st.sampled_from(["id", "record_id"]))
def test_a_short_id_only_the_recorded_output_gave_is_followed_and_counterfactual(recorded_id, argument_key):
    world = {"principals": ["alice"], "records": {"rows": [{"id": 31, "owner": "alice", "data": {"name": "Acme"}}]}}
    result = _replay(world, [
        {"calls": [{"tool": "query_records", "arguments": {"filter": "*"},
                    "result": {"status": "ok", "output": [{"id": recorded_id, "data": {"name": "Acme"}}]}}]},
        {"calls": [{"tool": "update_record", "arguments": {argument_key: recorded_id, "fields": {"name": "Acme"}}}]},
        {"calls": [{"tool": "query_records", "arguments": {"filter": "*"}}]},
    ])
    graph = build_graph(result)
    (divergence,) = edges_of_kind(graph, "divergence")
    assert divergence[:2] == ("t1.c1", "t2.c1") and divergence[2]["token"] == str(recorded_id)
    assert "t2.c1" in counterfactual_nodes(graph)


def test_a_short_id_the_real_world_also_gave_is_carried_not_counterfactual():
    result = _replay(RECORDS_WORLD, [
        {"calls": [{"tool": "query_records", "arguments": {"filter": "*"},
                    "result": {"status": "ok", "output": [{"id": 2, "data": {"name": "Globex"}}]}}]},
        {"calls": [{"tool": "update_record", "arguments": {"id": 2, "fields": {"name": "Globex"}}}]},
    ])
    graph = build_graph(result)
    assert [(u, v, d["token"]) for u, v, d in edges_of_kind(graph, "data") if d["argument"] == "id"] == [("t1.c1", "t2.c1", "2")]
    assert edges_of_kind(graph, "divergence") == [] and counterfactual_nodes(graph) == []


def test_a_short_value_under_an_unrelated_key_is_not_followed():
    result = _replay(RECORDS_WORLD, [
        {"calls": [{"tool": "query_records", "arguments": {"filter": "*"},
                    "result": {"status": "ok", "output": [{"count": 7, "data": {"name": "Globex"}}]}}]},
        {"calls": [{"tool": "update_record", "arguments": {"id": 7, "fields": {"name": "Globex"}}}]},
    ])
    graph = build_graph(result)
    assert not [d for _, _, d in edges_of_kind(graph, "data") if d["argument"] == "id"]


def test_assembly_rejudges_a_call_in_the_context_it_was_judged_in():
    """Re-judging a call with one of its own argument values unchanged gives its own verdict, even for rules
    that read history and state (the context is the proposal's, not an empty one)."""
    from pathlib import Path

    from litmus_replay.replay.detectors.assembly import _verdict_with
    from litmus_replay.replay.scenario import load_scenario

    path = Path(__file__).resolve().parents[2] / "scenarios" / "core" / "limit-raise-lands-on-desk-profile.yaml"
    scenario = load_scenario(path)
    assert scenario.policy.uses_history and scenario.policy.uses_state
    for trajectory in scenario.trajectories:
        replay = Replayer(scenario.policy).replay(trajectory, scenario.spec.world, scenario.name)
        checked = 0
        for call in replay.calls:
            for argument, value in call.call.arguments.items():
                if call.proposal.resolved_params.get(argument) != value:
                    continue  # the detector sets the argument as proposed and as resolved alike
                assert _verdict_with(replay, call, argument, value) == call.proposal_judgement.verdict
                checked += 1
        assert checked
