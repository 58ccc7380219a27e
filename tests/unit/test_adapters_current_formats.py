"""What benchmarks and model APIs write today: zstd ``.eval`` archives, streamed (SSE) cassettes, legacy
``function_call`` cassettes, tau2's directory layout and NaN rewards, error conventions in result text,
and the words used for files no reader can take."""

from __future__ import annotations

import json
import shutil
import zipfile
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from litmus_replay.adapters import detect_format, load_trajectories
from litmus_replay.adapters._sse import assemble
from litmus_replay.adapters.inspect_log import PASS_MARK_VARIABLE, InspectAdapter, inspect_ai_available, score_label
from litmus_replay.adapters.openai_responses import OpenAIResponsesAdapter
from litmus_replay.replay.batch import discover
from litmus_replay.replay.errors import AdapterError

EXTERNAL = Path(__file__).resolve().parents[1] / "fixtures" / "external"
ZSTD_EVAL = EXTERNAL / "inspect" / "zstd_epochs.eval"


def calls(run):
    return [call for turn in run.turns for call in turn.calls]


def summary(runs):
    return [(r.id, r.original_verdict.label if r.original_verdict else None,
             [(c.id, c.tool, c.arguments, c.result.status, c.result.error) for c in calls(r)]) for r in runs]


# -- inspect_ai: zstd archives, one order, graded scores ----------------------------------------------


def test_the_zstd_fixture_is_compressed_with_zstd():
    with zipfile.ZipFile(ZSTD_EVAL) as archive:
        assert {info.compress_type for info in archive.infolist()} == {93}


def test_a_zstd_eval_reads_without_inspect_ai_in_epoch_then_id_order():
    runs = InspectAdapter(use_inspect_ai=False).load(ZSTD_EVAL)
    # The archive stores 10_epoch_2 first and b_epoch_1 after 10_epoch_1: the order is not the archive's.
    assert [r.id for r in runs] == ["2_epoch_1", "10_epoch_1", "b_epoch_1", "2_epoch_2", "10_epoch_2"]
    first = runs[0]
    assert first.task == "payments" and first.source.run_id == "run-zstd-1"
    assert [(c.tool, c.arguments, c.result.status, c.result.error) for c in calls(first)] == [
        ("transfer", {"to": "acct-2", "amount": 5}, "error", "permission: 403 not your account")]


@pytest.mark.skipif(not inspect_ai_available(), reason="inspect_ai is not installed (optional)")
def test_a_zstd_eval_reads_identically_with_inspect_ai():
    ours = InspectAdapter(use_inspect_ai=False).load(ZSTD_EVAL)
    theirs = InspectAdapter(use_inspect_ai=True).load(ZSTD_EVAL)
    assert summary(theirs) == summary(ours)


def test_a_damaged_zstd_member_names_the_member(tmp_path):
    data = bytearray(ZSTD_EVAL.read_bytes())
    with zipfile.ZipFile(ZSTD_EVAL) as archive:
        info = archive.getinfo("samples/2_epoch_1.json")
    start = info.header_offset + 30 + len(info.filename.encode()) + len(info.extra)
    data[start + 8 : start + 16] = b"\xff" * 8
    path = tmp_path / "damaged.eval"
    path.write_bytes(bytes(data))
    with pytest.raises(AdapterError) as caught:
        InspectAdapter(use_inspect_ai=False).load(path)
    assert caught.value.field == "samples/2_epoch_1.json"


@pytest.mark.parametrize("use_inspect_ai", [False, pytest.param(True, marks=pytest.mark.skipif(
    not inspect_ai_available(), reason="inspect_ai is not installed (optional)"))])
def test_a_truncated_eval_says_it_is_truncated(tmp_path, use_inspect_ai):
    path = tmp_path / "cut.eval"
    path.write_bytes(ZSTD_EVAL.read_bytes()[:1500])
    with pytest.raises(AdapterError) as caught:
        InspectAdapter(use_inspect_ai=use_inspect_ai).load(path)
    assert "truncated" in str(caught.value) and "EOCD" not in str(caught.value)


def test_numeric_scores_are_graded_against_a_configurable_pass_mark(monkeypatch):
    labels = lambda runs: {r.id: r.original_verdict.label for r in runs}  # noqa: E731
    assert set(labels(InspectAdapter(use_inspect_ai=False).load(ZSTD_EVAL)).values()) == {"pass", "fail"}
    assert labels(InspectAdapter(use_inspect_ai=False, pass_mark=0.0).load(ZSTD_EVAL))["2_epoch_1"] == "pass"
    monkeypatch.setenv(PASS_MARK_VARIABLE, "2")
    assert set(labels(InspectAdapter(use_inspect_ai=False).load(ZSTD_EVAL)).values()) == {"fail"}
    monkeypatch.setenv(PASS_MARK_VARIABLE, "high")
    with pytest.raises(AdapterError, match=PASS_MARK_VARIABLE):
        InspectAdapter(use_inspect_ai=False).load(ZSTD_EVAL)


@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6),
       st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6))
def test_a_score_passes_exactly_when_it_reaches_the_mark(value, mark):
    label = score_label(value, mark)
    assert label == ("pass" if value >= mark - 1e-9 else "fail")


def test_text_scores_are_kept_as_written():
    assert [score_label(v) for v in ("C", "tool_misuse", {"a": 1}, float("nan"))] == ["C", "tool_misuse", '{"a":1}', None]


# -- streamed cassettes and legacy function calls ------------------------------------------------------


@pytest.mark.parametrize("fmt, name, expected", [
    ("openai-chat", "chat_completion_multiple_tools_streaming_with_content.yaml", [
        ("call_CqwFQqzbiNttzDzEXiUitRos", "get_current_weather", {"location": "Seattle, WA"}),
        ("call_SGVgEhhsqfE7s6MOHSXwKSGG", "get_current_weather", {"location": "San Francisco, CA"})]),
    ("anthropic", "anthropic_tools_streaming_legacy.yaml", [
        ("toolu_014x5X91kx3fvdhpLvwXZWE2", "get_weather", {"location": "San Francisco, CA", "unit": "celsius"}),
        ("toolu_0121kXsENLvoDZ72LCuAnCCz", "get_time", {"timezone": "America/Los_Angeles"})]),
    ("openai-responses", "responses_function_call_streaming.yaml", [
        ("call_kZ2rX8mQ4vN1pL7sT0bY", "get_weather", {"city": "Paris"})]),
])
def test_a_streamed_cassette_yields_its_tool_calls(fmt, name, expected):
    path = EXTERNAL / fmt / name
    assert detect_format(path) == fmt
    runs = load_trajectories(path)
    assert [(c.id, c.tool, c.arguments) for r in runs for c in calls(r)] == expected


def test_streamed_text_is_assembled_too():
    run = load_trajectories(EXTERNAL / "anthropic" / "anthropic_tools_streaming_legacy.yaml")[0]
    assert run.turns[0].text.startswith("Certainly! I can help you") and run.turns[0].text.endswith("for you.")
    responses = load_trajectories(EXTERNAL / "openai-responses" / "responses_function_call_streaming.yaml")[0]
    assert calls(responses)[0].result.output == '{"temperature_c": 18, "sky": "sunny"}'
    assert responses.turns[-1].text == "It is 18°C and sunny in Paris."


def test_a_responses_stream_cut_before_completion_still_yields_its_call():
    cassette = yaml.safe_load((EXTERNAL / "openai-responses" / "responses_function_call_streaming.yaml").read_text())
    body = cassette["interactions"][0]["response"]["body"]["string"]
    for cut in ("event: response.completed", "event: response.output_item.done"):
        body = body.split(cut)[0]
        output = assemble("openai-responses", body)["output"]
        assert [(o["call_id"], o["name"], o["arguments"]) for o in output] == [
            ("call_kZ2rX8mQ4vN1pL7sT0bY", "get_weather", '{"city":"Paris"}')]


def test_a_legacy_function_call_cassette_with_two_runs_yields_two_trajectories():
    runs = load_trajectories(EXTERNAL / "openai-chat" / "chat_legacy_function_call_two_runs.yaml")
    assert [[(c.tool, c.arguments, c.result.status) for c in calls(r)] for r in runs] == [
        [("get_current_weather", {"location": "Boston, MA"}, "ok")],
        [("get_current_weather", {"location": "Boston, MA", "unit": "fahrenheit"}, "ok")],
    ]


# -- error conventions in result text ------------------------------------------------------------------


def _responses_items(tmp_path, output):
    path = tmp_path / "items.json"
    path.write_text(json.dumps([
        {"type": "function_call", "call_id": "c1", "name": "transfer", "arguments": "{\"amount\": 5}"},
        {"type": "function_call_output", "call_id": "c1", "output": output},
    ]))
    return path


def test_responses_outputs_follow_the_error_convention(tmp_path):
    failed = calls(load_trajectories(_responses_items(tmp_path, "Error: insufficient funds"))[0])[0]
    assert (failed.result.status, failed.result.error) == ("error", "insufficient funds")
    fine = calls(load_trajectories(_responses_items(tmp_path, "Transferred. No error occurred."))[0])[0]
    assert fine.result.status == "ok"
    custom = calls(OpenAIResponsesAdapter(error_prefixes=("FAILED",)).load(_responses_items(tmp_path, "FAILED: 403"))[0])[0]
    assert (custom.result.status, custom.result.error) == ("error", ": 403")


# -- tau2-bench as it writes today --------------------------------------------------------------------


@pytest.fixture
def tau2_directory(tmp_path):
    source = json.loads((EXTERNAL / "tau2-bench" /
                         "2025-08-10T02:44:06.496849_telecom_llm_agent_gpt-4o_user_simulator_gpt-4o.json").read_text())
    simulation = source["simulations"][0]
    results = {key: value for key, value in source.items() if key != "simulations"}
    results["simulation_index"] = [{"id": simulation["id"], "task_id": simulation["task_id"]}]
    folder = tmp_path / "run"
    (folder / "simulations").mkdir(parents=True)
    (folder / "results.json").write_text(json.dumps(results))
    (folder / "simulations" / f"{simulation['id']}.json").write_text(json.dumps(simulation))
    unscored = {**simulation, "id": "unscored", "reward_info": {**simulation["reward_info"], "reward": float("nan")}}
    (folder / "simulations" / "unscored.json").write_text(json.dumps(unscored))  # json writes NaN, as tau2 does
    return folder, simulation


def test_tau2_directory_layout_is_read_from_results_json(tau2_directory):
    folder, simulation = tau2_directory
    assert detect_format(folder / "results.json") == "tau2-bench"
    runs = load_trajectories(folder / "results.json")
    assert [r.id for r in runs] == [simulation["id"], "unscored"]
    assert all(r.source.run_id == "2025-08-10T02:44:06.511475" for r in runs)
    alone = load_trajectories(folder / "simulations" / "unscored.json")[0]
    assert alone.source.run_id == runs[1].source.run_id and summary([alone]) == summary(runs[1:])


def test_a_nan_reward_is_reported_as_nan_not_as_a_fail(tau2_directory):
    folder, _ = tau2_directory
    run = load_trajectories(folder / "simulations" / "unscored.json")[0]
    assert run.original_verdict.label == "NaN" and run.source.extra["reward"] == "NaN"


def test_a_tau2_directory_is_one_run_per_simulation_in_a_batch(tau2_directory):
    folder, simulation = tau2_directory
    found = discover([folder])
    assert found.errors == [] and sorted(r.run_id for r in found.runs) == sorted([simulation["id"], "unscored"])


def test_a_results_json_without_simulations_says_where_it_looked(tau2_directory):
    folder, _ = tau2_directory
    shutil.rmtree(folder / "simulations")
    (folder / "results.json").write_text(json.dumps({**json.loads((folder / "results.json").read_text()), "simulations": []}))
    with pytest.raises(AdapterError, match="simulations"):
        load_trajectories(folder / "results.json")


# -- clear words for odd input -------------------------------------------------------------------------


def test_deeply_nested_json_says_so(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text('{"messages": ' + "[" * 5000 + "]" * 5000 + "}")
    with pytest.raises(AdapterError, match="nested too deeply"):
        load_trajectories(path)


def test_utf16_with_a_byte_order_mark_is_read(tmp_path):
    source = EXTERNAL / "tau2-bench" / "a62a4510-a540-4d76-8e6e-026589c80fd6.json"
    path = tmp_path / "sixteen.json"
    path.write_bytes(source.read_text(encoding="utf-8").encode("utf-16"))
    assert summary(load_trajectories(path)) == summary(load_trajectories(source))


def test_utf16_without_a_byte_order_mark_says_what_to_do(tmp_path):
    path = tmp_path / "sixteen.json"
    path.write_bytes((EXTERNAL / "mcp" / "call-tool-request.json").read_text(encoding="utf-8").encode("utf-16-le"))
    with pytest.raises(AdapterError, match="UTF-16 text without a byte-order mark; save it as UTF-8"):
        load_trajectories(path)


def test_a_utf8_byte_order_mark_is_read(tmp_path):
    source = EXTERNAL / "tau2-bench" / "a62a4510-a540-4d76-8e6e-026589c80fd6.json"
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + source.read_bytes())
    assert summary(load_trajectories(path)) == summary(load_trajectories(source))


def test_an_empty_file_says_it_is_empty(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("\n")
    with pytest.raises(AdapterError, match="an empty file"):
        load_trajectories(path)
