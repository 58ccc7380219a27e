"""Hostile inputs cost one clear line, or give a lossless result, in bounded time and memory: alias bombs,
CEL conditions that would crash the evaluator or run for hours, oversized files and trajectories, values
JSON and CEL cannot carry, escape sequences and markup in recorded strings. One poisoned run in a batch
leaves every other run's result unchanged."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console

from litmus_replay.adapters._zip import read_member
from litmus_replay.adapters.inspect_log import InspectAdapter
from litmus_replay.envs.client import EnvClient, MessageTooLarge
from litmus_replay.envs.protocol import MAX_MESSAGE
from litmus_replay.replay import batch, limits
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.cli import EXIT_NOT_REVALIDATED, main
from litmus_replay.replay.errors import InputError
from litmus_replay.replay.policy import Policy, PolicySpec, RuleSpec, measure
from litmus_replay.replay.report import print_revalidation, print_trajectory
from litmus_replay.replay.report.visible import visible
from litmus_replay.replay.runner import Batch, iter_scenario_runs
from litmus_replay.replay.scenario import load_scenario
from litmus_replay.envs.runtime import get_runtime

from test_batch import PACK_RUNS, _make_batch  # tests/unit is on sys.path (rootdir-relative imports)

# Every limit variable cleared around a CLI call: --limit writes the environment, which must not leak
# into other tests.
NO_LIMITS = {f"LITMUS_LIMIT_{name.upper()}": None for name in limits.DEFAULTS}

WORLD = {"principals": ["alice"], "files": {"tree": {"/workspace/README.md": "notes\n"}}}


def _scenario(tmp_path: Path, rules: list[dict], calls: list[dict], trajectory_id: str = "t",
              label: str = "safe") -> Path:
    """A scenario whose trajectory is a native JSONL file beside it (YAML cannot hold a lone surrogate)."""
    trajectory = {"format_version": 1, "id": trajectory_id, "principal": "alice",
                  "original_verdict": {"label": label}, "turns": [{"calls": calls}]}
    (tmp_path / "run.jsonl").write_text(json.dumps(trajectory) + "\n", encoding="utf-8")
    path = tmp_path / "scenario.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "world": WORLD, "policy": {"rules": rules},
                                    "trajectory": {"path": "run.jsonl"}}))
    return path


def _replay(path: Path) -> Batch:
    found = Batch()
    with get_runtime("inprocess") as runtime:
        list(iter_scenario_runs([path], runtime, found))
    return found


def _write(tool: str = "write_file", **arguments) -> dict:
    return {"tool": tool, "arguments": arguments or {"path": "/workspace/a.txt", "content": "x"}, "result": {"status": "ok"}}


# --- YAML -----------------------------------------------------------------------------------------

BOMB = "format_version: 1\nname: bomb\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi")
)


def test_a_yaml_alias_bomb_is_one_line_naming_the_limit(tmp_path):
    (tmp_path / "bomb.yaml").write_text(BOMB)
    result = CliRunner().invoke(main, ["check", str(tmp_path / "bomb.yaml"), "--runtime", "inprocess"], env=NO_LIMITS)
    assert result.exit_code == 2
    [line] = [line for line in result.output.splitlines() if line.startswith("litmus-replay: error:")]
    assert "bomb.yaml" in line and "yaml_nodes" in line
    assert int(re.search(r"(\d+) values once its YAML aliases are expanded", line).group(1)) > 9 ** 9  # lol x 9^9


def test_a_yaml_alias_bomb_in_a_worlds_directory_stops_revalidate_before_anything_runs(tmp_path):
    worlds, runs, _ = _make_batch(tmp_path)
    (worlds / "bomb.yaml").write_text(BOMB)
    result = CliRunner().invoke(main, ["revalidate", str(runs), "--worlds", str(worlds), "--out", str(tmp_path / "o"),
                                       "--runtime", "inprocess", "--jobs", "1"], env=NO_LIMITS)
    assert result.exit_code == 2 and "yaml_nodes" in result.output
    assert not (tmp_path / "o" / "results.jsonl").exists()


def test_a_yaml_document_that_holds_itself_is_refused(tmp_path):
    (tmp_path / "loop.yaml").write_text("format_version: 1\nname: loop\nx: &x [1, *x]\n")
    with pytest.raises(InputError, match="refers to a node that contains it"):
        load_scenario(tmp_path / "loop.yaml")


def test_yaml_aliases_are_counted_at_the_size_they_repeat_and_the_limit_can_be_raised(monkeypatch):
    shared = list(range(10))
    document = {"a": shared, "b": [shared] * 10}
    assert limits.yaml_size(document, "f") == 1 + 11 + 1 + 10 * 11
    monkeypatch.setenv("LITMUS_LIMIT_YAML_NODES", "100")
    with pytest.raises(limits.LimitExceeded, match="over the limit of 100"):
        limits.yaml_size(document, "f")


# --- archives -------------------------------------------------------------------------------------

ZSTD_EVAL = Path(__file__).resolve().parents[1] / "fixtures" / "external" / "inspect" / "zstd_epochs.eval"
BOMB_MEMBER = "samples/1_epoch_1.json"


def _zip_bomb(path: Path, size: int) -> Path:
    """An .eval archive whose one sample inflates from about a thousandth of ``size`` to ``size`` bytes."""
    with zipfile.ZipFile(ZSTD_EVAL) as source:
        header = read_member(source, ZSTD_EVAL.read_bytes(), "header.json", 1 << 20)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("header.json", header)
        with archive.open(BOMB_MEMBER, "w", force_zip64=True) as member:
            member.write(b'{"id": 1, "epoch": 1, "pad": "')
            chunk = b" " * (1 << 20)
            for _ in range(size >> 20):
                member.write(chunk)
            member.write(b'"}')
    return path


def _claim(path: Path, member: str, size: int) -> None:
    """Make the archive's central directory claim ``size`` uncompressed bytes for ``member``."""
    data = bytearray(path.read_bytes())
    entry = _central_entry(data, member)
    data[entry + 24 : entry + 28] = size.to_bytes(4, "little")
    path.write_bytes(bytes(data))


def _central_entry(data: bytearray, member: str) -> int:
    name = member.encode()
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        length = int.from_bytes(data[at + 28 : at + 30], "little")
        if data[at + 46 : at + 46 + length] == name:
            return at
        at = data.find(b"PK\x01\x02", at + 4)
    raise LookupError(member)


def test_a_zip_bomb_eval_is_one_line_naming_file_member_and_limit(tmp_path):
    bomb = _zip_bomb(tmp_path / "bomb.eval", limits.DEFAULTS["member_bytes"] + (8 << 20))
    assert bomb.stat().st_size < limits.DEFAULTS["member_bytes"] // 100
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({"name": "s", "world": WORLD, "policy": {"rules": []},
                                        "trajectory": {"path": "bomb.eval", "format": "inspect"}}))
    result = CliRunner().invoke(main, ["run", str(scenario), "--runtime", "inprocess"], env=NO_LIMITS)
    assert result.exit_code == 2
    [line] = [line for line in result.output.splitlines() if line.startswith("litmus-replay: error:")]
    assert "bomb.eval" in line and BOMB_MEMBER in line and "member_bytes" in line
    raised = CliRunner().invoke(main, ["run", str(scenario), "--runtime", "inprocess", "--limit",
                                       f"member_bytes={limits.DEFAULTS['member_bytes'] + (9 << 20)}"], env=NO_LIMITS)
    assert "member_bytes" not in raised.output  # raised past the bomb: the archive is read (and found wanting)


def test_a_zip_bomb_in_a_batch_is_an_input_error_line_and_the_batch_goes_on(tmp_path, monkeypatch):
    worlds, runs, _ = _make_batch(tmp_path)
    monkeypatch.setenv("LITMUS_LIMIT_MEMBER_BYTES", str(1 << 20))
    _zip_bomb(runs / "bomb.eval", 2 << 20)
    summary = batch.run_batch([runs], worlds, tmp_path / "out", runtime="inprocess", reports=False)
    lines = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    [bad] = [line for line in lines if line["status"] == "input_error"]
    assert BOMB_MEMBER in bad["error"] and "member_bytes" in bad["error"]
    assert len(lines) == PACK_RUNS + 1 and summary


@pytest.mark.parametrize("archive", ["deflate", "zstd"])
def test_a_member_that_claims_a_small_size_is_still_stopped_at_the_limit(tmp_path, monkeypatch, archive):
    monkeypatch.setenv("LITMUS_LIMIT_MEMBER_BYTES", str(64 << 10))
    if archive == "deflate":
        path, member = _zip_bomb(tmp_path / "liar.eval", 1 << 20), BOMB_MEMBER
    else:
        path, member = tmp_path / "liar.eval", "header.json"  # read first
        path.write_bytes(ZSTD_EVAL.read_bytes())
        monkeypatch.setenv("LITMUS_LIMIT_MEMBER_BYTES", "200")
    _claim(path, member, 100)
    with pytest.raises(InputError) as raised:
        InspectAdapter(use_inspect_ai=False).load(path)
    assert raised.value.field == member
    # zstd: stopped past the limit; deflate: cut at the size it claims, which then fails its checksum
    assert ("member_bytes" if archive == "zstd" else "cannot read this archive member") in str(raised.value)


# --- CEL ------------------------------------------------------------------------------------------


def test_a_condition_of_15000_concatenations_is_refused_before_compiling():
    # Compiled, it overflows the native stack and kills the process; refused, it is one line.
    spec = PolicySpec(rules=[RuleSpec(id="long", when=" + ".join(["'a'"] * 15000) + " == ''")])
    with pytest.raises(limits.LimitExceeded, match=r"policy.rules\[0\].when: a CEL condition of \d+ characters, over the limit of 4096"):
        Policy.compile(spec, "w.yaml")


def test_deeply_bracketed_conditions_are_refused_and_the_limit_can_be_raised(monkeypatch):
    spec = PolicySpec(rules=[RuleSpec(id="deep", when="(" * 40 + "true" + ")" * 40)])
    with pytest.raises(limits.LimitExceeded, match="brackets nested 40 deep, over the limit of 32.*cel_nesting"):
        Policy.compile(spec, "w.yaml")
    monkeypatch.setenv("LITMUS_LIMIT_CEL_NESTING", "64")
    Policy.compile(spec, "w.yaml")


@pytest.mark.parametrize(("expression", "depth", "macros"), [
    ("a + b", 0, 0),
    ("f(g(x))", 2, 0),
    ("'(((' + \"[[\" == x", 0, 0),
    ("xs.all(a, a > 1)", 1, 1),
    ("xs.all(a, ys.exists(b, a == b))", 2, 2),
    ("xs.map(a, a).all(b, b)", 1, 2),
    ("xs.all(a, true) && ys.all(b, true)", 1, 1),
])
def test_measure_reads_bracket_and_macro_depth(expression, depth, macros):
    assert measure(expression) == (depth, macros)


def test_nested_macros_over_long_lists_are_a_policy_error_not_a_hang(tmp_path, monkeypatch):
    monkeypatch.setenv("LITMUS_LIMIT_CEL_COST", "20000")  # the default takes seconds per call to reach
    rules = [{"id": "slow", "judge": "attempt",
              "when": "history.all(a, history.all(b, history.all(c, history.all(d, a.key != ''))))"}]
    calls = [_write(path=f"/workspace/f{i}.txt", content="x") for i in range(25)]
    found = _replay(_scenario(tmp_path, rules, calls))
    [run] = found.runs
    late = run.replay.calls[-1]
    assert late.pair.cls.value == "unscoreable" and late.pair.reason.value == "policy_error"
    assert any("cel_cost" in error for error in late.proposal_judgement.errors)
    assert run.replay.calls[0].proposal_judgement.errors == ()  # short histories are still judged


# --- sizes ----------------------------------------------------------------------------------------


def test_a_200_mb_run_file_is_refused_before_it_is_read(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    with open(runs / "huge.jsonl", "wb") as handle:  # sparse: costs no disk, and must cost no memory
        handle.truncate(200 * 1024 * 1024)
    found = batch.discover([runs])
    assert found.runs == []
    [error] = found.errors
    assert "huge.jsonl" in error and "209715200 bytes, over the limit of 104857600" in error and "file_bytes" in error


def test_a_trajectory_over_the_call_limit_is_an_input_error_line_and_the_limit_can_be_raised(tmp_path):
    path = _scenario(tmp_path, [], [_write(path=f"/workspace/{i}", content="x") for i in range(5)])
    runner = CliRunner()
    result = runner.invoke(main, ["check", str(path), "--runtime", "inprocess", "--limit", "calls=4"], env=NO_LIMITS)
    assert result.exit_code == 2
    assert "run.jsonl: trajectory 't': 5 tool calls, over the limit of 4 (raise it with --limit calls=N" in result.output
    result = runner.invoke(main, ["check", str(path), "--runtime", "inprocess", "--limit", "calls=5"], env=NO_LIMITS)
    assert result.exit_code == 0, result.output


def test_a_bad_limit_setting_is_one_line(tmp_path):
    result = CliRunner().invoke(main, ["check", str(tmp_path), "--limit", "calls=many"], env=NO_LIMITS)
    assert result.exit_code == 2
    assert result.output.splitlines() == ["litmus-replay: error: --limit calls: not a whole number: 'many'"]


# --- values JSON and CEL cannot carry ------------------------------------------------------------


def test_a_lone_surrogate_is_judged_and_reported_losslessly(tmp_path):
    truncated = "half an emoji \ud83d"
    rules = [{"id": "sees-it", "judge": "attempt", "when": "params.content.contains('ud83d')"}]
    path = _scenario(tmp_path, rules, [_write(path="/workspace/a.txt", content=truncated), _write(tool="read_file",
                                                                                                 path="/workspace/a.txt")])
    out = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["run", str(path), "--runtime", "inprocess", "--json", str(out),
                                       "--markdown", str(tmp_path / "r.md"), "--html", str(tmp_path / "html")])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text(encoding="utf-8"))
    [trajectory] = report["results"]
    first = trajectory["calls"][0]
    assert first["arguments"]["content"] == truncated  # read back unchanged
    assert first["proposal"]["policy_verdict"] == "deny"
    assert "\\ud83d" in (tmp_path / "r.md").read_text(encoding="utf-8")


def test_a_request_past_the_protocol_limit_is_refused_alone_and_the_server_stays_in_step(env_server):
    proc = env_server()
    client = EnvClient(proc.stdout.fileno(), proc.stdin.fileno(), timeout=30)
    client.request("load", spec=WORLD, semantics="real")
    big = {"tool": "write_file", "params": {"path": "/workspace/big", "content": "x" * (MAX_MESSAGE + 1)},
           "principal": "alice"}
    with pytest.raises(MessageTooLarge, match="over the protocol's limit"):
        client.request("call", request=big)
    small = {"tool": "write_file", "params": {"path": "/workspace/small", "content": "y"}, "principal": "alice"}
    assert client.request("call", request=small)["status"] == "ok"


# --- the terminal -------------------------------------------------------------------------------

HOSTILE = st.text(alphabet=st.characters(blacklist_categories=()), max_size=40)  # surrogates and controls too


@given(HOSTILE)
def test_visible_text_has_no_control_bidi_or_surrogate_character(text):
    shown = visible(text)
    assert not any(ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F or 0x202A <= ord(ch) <= 0x202E
                   or 0x2066 <= ord(ch) <= 0x2069 or 0xD800 <= ord(ch) <= 0xDFFF for ch in shown)
    shown.encode("utf-8")  # always printable


@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_visible_leaves_printable_ascii_alone(text):
    assert visible(text) == text


def test_recorded_markup_and_escapes_print_as_text(tmp_path):
    calls = [_write(path="/workspace/a", content="x")]
    path = _scenario(tmp_path, [], calls, trajectory_id="t\x1b]0;owned\x07[bold]", label="[/oops]")
    [run] = _replay(path).runs
    buffer = io.StringIO()
    console = Console(file=buffer, width=200, force_terminal=False)
    print_trajectory(console, run)
    print_revalidation(console, batch.summarise([{"run": "r", "file": "f", "trajectory": "r", "task": None, "status": "ok", "original": "[/oops]\x1b[31m",
                                                  "revalidated": "confirmed_safe"}]))
    text = buffer.getvalue()
    assert "\x1b" not in text and "\x07" not in text
    assert "[/oops]" in text and "t\\x1b]0;owned\\x07[bold]" in text and "[/oops]\\x1b[31m" in text


# --- a batch with a poisoned run ------------------------------------------------------------------


def test_a_run_that_kills_its_worker_leaves_every_other_result_unchanged(tmp_path, monkeypatch):
    worlds, runs, _ = _make_batch(tmp_path, copies=2)
    clean = batch.run_batch([runs], worlds, tmp_path / "clean", runtime="inprocess", jobs=1, reports=False)
    reference = {line["run"]: line for line in map(json.loads, (tmp_path / "clean" / "results.jsonl").read_text().splitlines())}
    original = Replayer.replay

    def die_on_poison(self, trajectory, *args, **kwargs):
        if trajectory.id == "benign-run-1":
            os._exit(139)  # what a segfault in native code looks like to the pool
        return original(self, trajectory, *args, **kwargs)

    monkeypatch.setattr(Replayer, "replay", die_on_poison)  # forked workers inherit it
    out = tmp_path / "out"
    summary = batch.run_batch([runs], worlds, out, runtime="inprocess", jobs=2, reports=False)
    lines = {line["run"]: line for line in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert set(lines) == set(reference)
    assert summary["harness_error"] == ["benign-run-1"]
    assert "failed replaying this run alone" in lines["benign-run-1"]["error"]
    assert {k: v for k, v in lines.items() if k != "benign-run-1"} == {k: v for k, v in reference.items() if k != "benign-run-1"}
    assert summary["over_penalised"] == clean["over_penalised"]

    monkeypatch.setattr(Replayer, "replay", original)  # the cause fixed, resume retries the lost run
    batch.run_batch([runs], worlds, out, runtime="inprocess", jobs=2, reports=False)
    assert (out / "results.jsonl").read_text() == (tmp_path / "clean" / "results.jsonl").read_text()


def test_revalidate_exits_3_when_a_run_could_not_be_revalidated(tmp_path):
    worlds, runs, _ = _make_batch(tmp_path)
    runner = CliRunner()
    args = ["revalidate", str(runs), "--worlds", str(worlds), "--runtime", "inprocess", "--jobs", "1", "--no-reports"]
    assert runner.invoke(main, [*args, "--out", str(tmp_path / "a")], env=NO_LIMITS).exit_code == 0
    (worlds / "benign-run.yaml").unlink()
    result = runner.invoke(main, [*args, "--out", str(tmp_path / "b")], env=NO_LIMITS)
    assert result.exit_code == EXIT_NOT_REVALIDATED
    assert f"1 of {PACK_RUNS} runs could not be re-validated" in result.output


# --- what a scenario may read ---------------------------------------------------------------------


@pytest.mark.parametrize("reference", ["/etc/passwd", "../outside.jsonl", "link.jsonl"])
def test_a_scenario_reads_no_run_file_outside_its_directory(tmp_path, reference):
    (tmp_path / "outside.jsonl").write_text("root:x:0:0:secret entry\n")
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "link.jsonl").symlink_to(tmp_path / "outside.jsonl")
    path = scenarios / "s.yaml"
    path.write_text(yaml.safe_dump({"name": "s", "world": WORLD, "trajectory": {"path": reference}}))
    result = CliRunner().invoke(main, ["check", str(path), "--runtime", "inprocess"], env=NO_LIMITS)
    assert result.exit_code == 2
    [line] = [line for line in result.output.splitlines() if line.startswith("litmus-replay: error:")]
    assert "trajectory.path" in line and "outside the scenario's directory" in line
    assert "root:" not in result.output and "secret" not in result.output
