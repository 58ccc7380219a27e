"""The stub fidelity lab on the built-in domains: every known divergence kind found and shrunk to at most
three calls, faithful stubs at 100 % with no counterexample, every counterexample replayable by
``litmus-replay run`` to the divergence it claims, runs reproducible from the seed, and the pytest plugin
used from a separate example project."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from litmus_replay.envs import Outcome
from litmus_replay.envs.runtime import get_runtime
from litmus_replay.replay.cli import main
from litmus_replay.replay.fidelity import compare, get_space, measure

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "fidelity-demo"
EXAMPLES = "60"
STEPS = "4"

# (domain[:profile] as the report labels it, a kind its stub is known to get wrong)
KNOWN = [
    ("records:default", "real refused 403"),
    ("records:default", "real refused 409"),
    ("bank:default", "real refused 403"),
    ("bank:default", "real refused 409"),
    ("bank:default", "real held at a gate"),
    ("bank:default", "real refused 429"),
    ("bank:default", "real replayed (idempotent)"),
    ("profiles:default", "other principal (ambient session)"),
    ("files:default", "symlink resolution"),
    ("files:default", "stub refused EACCES through '..'"),
    ("files:raw-prefix", "'..' resolution"),
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    out = tmp_path_factory.mktemp("fidelity")
    result = CliRunner().invoke(main, ["fidelity", "records", "bank", "profiles", "files", "--runtime", "inprocess",
                                       "--examples", EXAMPLES, "--steps", STEPS, "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    return out, {_label(entry): entry for entry in report["domains"]}, result.output


def _label(entry: dict) -> str:
    return entry["domain"] + (f":{entry['profile']}" if entry["profile"] else "")


@pytest.mark.parametrize("label, kind", KNOWN)
def test_each_known_divergence_has_a_minimal_counterexample(lab, label, kind):
    _, domains, _ = lab
    examples = {example["kind"]: example for example in domains[label]["counterexamples"]}
    assert kind in examples, f"{label}: found only {sorted(examples)}"
    assert len(examples[kind]["calls"]) <= 3


def test_a_faithful_stub_agrees_everywhere_and_has_no_counterexample(lab):
    _, domains, _ = lab
    faithful = domains["profiles:session"]  # the stub re-derives the principal from the session, as real does
    assert faithful["agreement"] == 1.0 and faithful["calls_compared"] > 0
    assert faithful["counterexamples"] == []
    unfaithful = domains["profiles:default"]
    assert unfaithful["agreement"] < 1.0 and unfaithful["classes"]["other_principal"] > 0


def test_the_report_counts_agreement_per_tool_and_class(lab):
    out, domains, output = lab
    bank = domains["bank:default"]
    assert set(bank["tools"]) <= {"get_balance", "transfer_funds", "confirm_transfer"}
    assert sum(tool["calls"] for tool in bank["tools"].values()) == bank["calls_compared"]
    assert sum(tool["agreed"] for tool in bank["tools"].values()) / bank["calls_compared"] == pytest.approx(
        bank["agreement"], abs=1e-4)
    assert "bank:default" in output and "minimal counterexample" in output
    assert "<table>" in (out / "index.html").read_text()


def test_every_counterexample_replays_to_the_divergence_it_claims(lab, tmp_path):
    _, domains, _ = lab
    claimed = [example for entry in domains.values() for example in entry["counterexamples"]]
    assert claimed
    for example in claimed:
        report = tmp_path / "run.json"
        result = CliRunner().invoke(main, ["run", example["scenario"], "--runtime", "inprocess", "--json", str(report)])
        assert result.exit_code == 0, (example["scenario"], result.output)  # its expectations hold
        calls = {call["key"]: call for call in json.loads(report.read_text())["results"][0]["calls"]}
        call = calls[example["call"]]
        divergence = compare(Outcome.from_dict(call["stub"]), Outcome.from_dict(call["real"]), call["arguments"])
        assert divergence is not None, example["scenario"]
        assert (divergence.kind, list(divergence.classes)) == (example["kind"], example["classes"]), example["scenario"]


def test_the_same_seed_gives_the_same_result():
    runtime = get_runtime("inprocess")

    def run(seed):
        result = measure(get_space("records"), runtime, runtime, examples=15, seed=seed, steps=3)
        return result.tally.calls, result.tally.classes, [(c.kind, [s.request for s in c.steps]) for c in result.counterexamples]

    assert run(7) == run(7)


def test_bad_domains_are_one_line_and_exit_2():
    for args in (["nosuch"], ["files:lenient"]):
        result = CliRunner().invoke(main, ["fidelity", *args, "--runtime", "inprocess"])
        assert result.exit_code == 2
        assert len(result.output.strip().splitlines()) == 1 and "DOMAIN" in result.output


def test_the_pytest_plugin_fails_the_unfaithful_stub_and_passes_the_faithful_one():
    env = {**os.environ, "PYTHONPATH": str(DEMO / "src")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "tests", "-p", "no:cacheprovider", "-q", "--rootdir", str(DEMO)],
        cwd=DEMO, env=env, capture_output=True, text=True, timeout=900,
    )
    assert "1 failed, 1 passed" in done.stdout, done.stdout + done.stderr
    assert "test_canned_stub_is_faithful" in done.stdout
    assert "minimal counterexample" in done.stdout and "real refused 403" in done.stdout


def test_masked_shell_failures_are_found_in_an_isolated_world(runtime_opener, tmp_path):
    runtime = runtime_opener("sandbox")
    try:
        result = measure(get_space("shell"), get_runtime("inprocess"), runtime, examples=10, seed=0, steps=2)
        masked = [c for c in result.counterexamples if c.kind == "masked shell failure"]
        assert masked and len(masked[0].steps) <= 3, [c.kind for c in result.counterexamples]
        from litmus_replay.replay.fidelity.scenarios import write_counterexample

        path = write_counterexample(masked[0], tmp_path, 1, get_runtime("inprocess"), runtime)
    finally:
        runtime.close()
    report = tmp_path / "run.json"
    ran = CliRunner().invoke(main, ["run", str(path), "--runtime", "sandbox", "--json", str(report)])
    assert ran.exit_code == 0, ran.output
    call = json.loads(report.read_text())["results"][0]["calls"][-1]
    again = compare(Outcome.from_dict(call["stub"]), Outcome.from_dict(call["real"]), call["arguments"])
    assert again is not None and again.kind == "masked shell failure"
