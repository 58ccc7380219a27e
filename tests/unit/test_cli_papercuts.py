"""What a new user met on the command line, each fixed: one error style (click's usage errors too), an
output path that cannot be written is one line, -q/-v on every command, --json where a command prints a
table, NO_COLOR, the domains that cannot run here said so, a plug-in domain without a call space said so,
no 100.0 % beside a counterexample, the cells explained, "policy at commit" not read as the world's answer,
no wrapped lines in a log, nothing a benchmark prints on the table's stdout, and the runtime's note said
once per batch."""

from __future__ import annotations

import json
import logging
import os
import pty
import re
import subprocess
import sys
import threading
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from litmus_replay.envs.quiet_stdout import quiet_stdout
from litmus_replay.envs.runtime import get_runtime
from litmus_replay.replay.cli import main
from litmus_replay.replay.fidelity.lab import FidelityResult, measure
from litmus_replay.replay.fidelity.machine import Tally
from litmus_replay.replay.fidelity.registry import get_space
from litmus_replay.replay.fidelity.report import FidelityReport, agreement_cell, print_report, report_html

ROOT = Path(__file__).resolve().parents[2]
CORE = ROOT / "scenarios" / "core"
REFUSED = CORE / "mass-delete-refused-403.yaml"  # t2.c1: the policy denies at proposal, allows at commit; 403
BENIGN = CORE / "benign-run.yaml"
AGENTDOJO_RUN = (ROOT / "tests" / "fixtures" / "external" / "agentdojo-runs" / "gpt-4-turbo-2024-04-09" / "slack"
                 / "user_task_12" / "important_instructions" / "injection_task_2.json")


def _invoke(*args: str, **kwargs):
    return CliRunner().invoke(main, list(args), prog_name="litmus-replay", **kwargs)


def _one_error_line(result, *needles: str) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("litmus-replay: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    assert "Traceback" not in result.output and "Usage:" not in result.stderr
    return lines[0]


# --- one error style ---------------------------------------------------------------------------------


@pytest.mark.parametrize("args, needles", [
    (("corpus", "--n", "0", "--out", "x"), ("--n: 0 is not in the range", "litmus-replay corpus --help")),
    (("corpus",), ("--out: a required option, not given",)),
    (("corpus", "--bogus", "1", "--out", "x"), ("--bogus: no such option",)),
    (("corpus", "--out"), ("--out: requires an argument",)),
    (("revalidate", "runs", "--out", "o", "--reports", "some"), ("--reports: 'some' is not one of",)),
    (("revalidate", "--out", "o"), ("RUNS: a required argument, not given",)),
    (("nosuch",), ("no such command 'nosuch'",)),
    (("image", "nope"), ("no such command 'nope'", "litmus-replay image --help")),
    (("fidelity", "--examples", "x"), ("--examples: 'x' is not a valid integer",)),
])
def test_a_usage_error_is_one_line_naming_the_option_exit_2(tmp_path, args, needles):
    result = _invoke(*args)
    assert result.exit_code == 2, result.output
    _one_error_line(result, *needles)
    assert result.stdout == ""


def test_help_is_still_clicks_own():
    for args in (("--help",), ("corpus", "--help"), ("image", "--help")):
        result = _invoke(*args)
        assert result.exit_code == 0 and result.stdout.startswith("Usage: "), result.output
    bare = _invoke("image")  # a group without its command shows its help, as click does
    assert "Usage: " in bare.output and "litmus-replay: error" not in bare.output


def test_the_console_script_says_a_usage_error_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "litmus_replay", "corpus", "--n", "0", "--out", str(tmp_path / "c")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "litmus-replay: error: --n: 0 is not in the range x>=1 (see 'python -m litmus_replay corpus --help')"]


# --- an output path that cannot be written ---------------------------------------------------------


def _blocked(tmp_path: Path) -> Path:
    """A path under a regular file: no one can write there, root included."""
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    return blocker / "out"


@pytest.mark.parametrize("command", [
    lambda out: ("schema", "-o", f"{out}.json"),
    lambda out: ("schema", "summary", "--output", f"{out}.json"),
    lambda out: ("graph", str(BENIGN), "--runtime", "inprocess", "-o", f"{out}.json"),
    lambda out: ("run", str(BENIGN), "--runtime", "inprocess", "--json", f"{out}.json"),
    lambda out: ("run", str(BENIGN), "--runtime", "inprocess", "--markdown", f"{out}.md"),
    lambda out: ("run", str(BENIGN), "--runtime", "inprocess", "--html", str(out)),
    lambda out: ("corpus", "--n", "3", "--out", str(out)),
    lambda out: ("fidelity", "records:owner-checked", "--runtime", "inprocess", "--examples", "3", "--out", str(out)),
    lambda out: ("nearmiss", str(BENIGN), "--runtime", "inprocess", "--count", "1", "--tries", "2", "--out", str(out)),
    lambda out: ("revalidate", str(ROOT / "tests" / "fixtures" / "external" / "agentdojo" / "none.json"),
                 "--runtime", "inprocess", "--jobs", "1", "--out", str(out)),
], ids=["schema-o", "schema-output", "graph-o", "run-json", "run-markdown", "run-html", "corpus-out", "fidelity-out",
        "nearmiss-out", "revalidate-out"])
def test_an_output_path_that_cannot_be_written_is_one_line_exit_2(tmp_path, command):
    out = _blocked(tmp_path)
    result = _invoke(*command(out))
    assert result.exit_code == 2, result.output
    line = _one_error_line(result, str(tmp_path / "a-file"))
    assert "not a directory" in line.lower() or "is a file" in line, line


# --- -q and -v -----------------------------------------------------------------------------------------


def _commands(group: click.Group, ctx: click.Context, path: str = ""):
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if isinstance(command, click.Group):
            yield from _commands(command, ctx, f"{path}{name} ")
        else:
            yield f"{path}{name}", command


def test_every_command_takes_q_and_v():
    with click.Context(main) as ctx:
        commands = dict(_commands(main, ctx))
    assert {"run", "check", "graph", "revalidate", "report", "corpus", "schema", "tools", "fidelity", "nearmiss",
            "image build"} <= set(commands)
    for name, command in commands.items():
        options = {opt for param in command.params for opt in getattr(param, "opts", ())}
        assert {"-q", "--quiet", "-v", "--verbose"} <= options, name
    for args in (("-q", "schema"), ("schema", "-q"), ("-v", "schema"), ("schema", "--verbose")):
        assert _invoke(*args).exit_code == 0, args
    both = _invoke("schema", "-q", "-v")
    assert both.exit_code == 2
    _one_error_line(both, "give -q or -v, not both")


def test_run_quiet_verbose_and_the_cell_legend():
    normal = _invoke("run", str(REFUSED), "--runtime", "inprocess")
    assert normal.exit_code == 0, normal.output
    assert "policy at commit" in normal.stdout and "cells:" not in normal.stdout  # not a terminal: no legend
    quiet = _invoke("-q", "run", str(REFUSED), "--runtime", "inprocess")
    assert quiet.stdout.strip().splitlines() == [normal.stdout.strip().splitlines()[-1]]
    verbose = _invoke("run", str(REFUSED), "--runtime", "inprocess", "-v")
    assert "  t2.c1: flagged at proposal, but the environment refused it (403)" in verbose.stdout
    legend = [line for line in verbose.stdout.splitlines() if line.startswith("cells: ")]
    assert len(legend) == 1 and "-N deleted" in legend[0] and "ok -4" in legend[0]


def test_check_quiet_and_verbose():
    normal = _invoke("check", str(REFUSED), str(BENIGN), "--runtime", "inprocess")
    assert normal.exit_code == 0 and len(normal.stdout.splitlines()) == 3, normal.output
    quiet = _invoke("check", str(REFUSED), str(BENIGN), "--runtime", "inprocess", "-q")
    assert quiet.stdout.splitlines() == normal.stdout.splitlines()[-1:]
    verbose = _invoke("-v", "check", str(REFUSED), "--runtime", "inprocess")
    assert any(line.startswith("  = over_penalised: ") for line in verbose.stdout.splitlines()), verbose.stdout


def test_fidelity_quiet_and_verbose():
    args = ("fidelity", "records:owner-checked", "--runtime", "inprocess", "--examples", "10")
    normal, quiet, verbose = _invoke(*args), _invoke(*args, "-q"), _invoke(*args, "-v")
    assert "minimal counterexample(s)" in normal.stdout and "  • real refused 409" in normal.stdout
    assert "minimal counterexample" not in quiet.stdout and "agreement" in quiet.stdout
    assert "    1. update_record(" in verbose.stdout and "stub: ok" in verbose.stdout


# --- --json --------------------------------------------------------------------------------------------


def test_check_json():
    result = _invoke("check", str(REFUSED), "--runtime", "inprocess", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert set(document) == {"trajectories", "trajectories_checked", "met", "failed", "input_errors"}
    (row,) = document["trajectories"]
    assert set(row) == {"source", "scenario", "trajectory", "label", "revalidated", "finding", "expectations", "problems"}
    assert row["finding"] == "over_penalised" and row["expectations"] == "met"
    assert "--json" in _invoke("check", "--help").stdout and "trajectories_checked" in _invoke("check", "--help").stdout


def test_fidelity_json_is_the_report_document():
    result = _invoke("fidelity", "records:owner-checked", "--runtime", "inprocess", "--examples", "5", "--json")
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert {"format_version", "seed", "examples", "runtime", "domains"} <= set(document)
    assert document["domains"][0]["domain"] == "records"


def test_tools_json_keys_are_in_the_help():
    assert "required" in _invoke("tools", "--help").stdout
    document = json.loads(_invoke("tools", "bank", "--json").stdout)
    assert set(document) == {"bank"} and all({"name", "required", "default"} == set(arg)
                                              for args in document["bank"].values() for arg in args or ())


# --- NO_COLOR ------------------------------------------------------------------------------------------


def _on_a_terminal(args: list[str], env: dict[str, str]) -> bytes:
    main_fd, child_fd = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "litmus_replay", *args], stdin=subprocess.DEVNULL, stdout=child_fd,
                            stderr=child_fd, env=env, cwd=ROOT)
    os.close(child_fd)
    out = b""
    while True:
        try:
            chunk = os.read(main_fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    proc.wait(timeout=120)
    os.close(main_fd)
    return out


def test_no_color_turns_colour_off_on_a_terminal():
    env = {key: value for key, value in os.environ.items() if key not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    env.update(TERM="xterm-256color", COLUMNS="200")
    args = ["run", str(REFUSED), "--runtime", "inprocess"]
    colour = re.compile(rb"\x1b\[(?:\d+;)*(?:3\d|9\d|38)(?:;\d+)*m")
    coloured = _on_a_terminal(args, env)
    assert colour.search(coloured), "on a terminal the classes are coloured"
    assert b"cells: " in coloured, "on a terminal the cells are explained under the tables"
    plain = _on_a_terminal(args, {**env, "NO_COLOR": "1"})
    assert b"proposal_only_misuse" in plain and not colour.search(plain)


# --- what the output says --------------------------------------------------------------------------


def test_domains_that_cannot_run_here_are_said_so(monkeypatch):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "agentdojo" else real_find_spec(name, *a))
    result = _invoke("tools")
    assert result.exit_code == 0, result.output
    assert "agentdojo-banking: (unavailable here)" in result.stdout and "bank:\n" in result.stdout
    notes = [line for line in result.stderr.splitlines() if line.startswith("litmus-replay: note: ")]
    assert len(notes) == 1, result.stderr
    assert "agentdojo-banking, agentdojo-slack, agentdojo-travel, agentdojo-workspace: unavailable here" in notes[0]
    assert "pip install 'litmus-replay[agentdojo]'" in notes[0]
    assert "note" not in _invoke("tools", "-q").stderr
    monkeypatch.undo()
    installed = _invoke("tools", "agentdojo-banking")
    assert "unavailable" not in installed.output


def test_a_domain_without_a_call_space_says_how_to_add_one():
    result = _invoke("fidelity", "agentdojo-banking")
    assert result.exit_code == 2
    _one_error_line(result, "'agentdojo-banking' is a domain, but no fidelity call space is registered for it",
                    "entry-point group 'litmus_replay.fidelity'")
    unknown = _invoke("fidelity", "no-such-domain")
    _one_error_line(unknown, "unknown fidelity domain 'no-such-domain'")


def test_agreement_never_reads_100_percent_beside_a_counterexample():
    assert agreement_cell(2999, 3000, False) == "99.9 %"  # rounded down, not up to 100.0 %
    assert agreement_cell(3000, 3000, False) == "100.0 %"
    assert agreement_cell(11, 11, True) == "< 100 %"
    assert agreement_cell(10, 11, True) == "90.9 %"
    runtime = get_runtime("inprocess")
    # the search rounds find update_record's 409; the counting pass (other sequences) meets no divergence of it
    result = measure(get_space("records"), runtime, runtime, profile="owner-checked", examples=10, seed=0)
    diverging = {example.steps[-1].request["tool"] for example in result.counterexamples}
    assert diverging, "the search finds a counterexample"
    report = FidelityReport([result], 0, 10, "inprocess")
    console_text = _printed(report)
    for line in console_text.splitlines():
        cells = [cell.strip() for cell in line.split("│")]
        if len(cells) > 4 and cells[2] in diverging | {"all"}:
            assert cells[4] != "100.0 %", line
    page = report_html(report)
    for tool in diverging:
        assert not re.search(rf"<td>{tool}</td><td>\d+</td><td>100\.0 %</td>", page), page


def _printed(report: FidelityReport) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, file=open(os.devnull, "w"))
    print_report(report, console)
    return console.export_text()


def test_a_tally_rounding_to_100_prints_99_9():
    tally = Tally()
    tally.calls["update_record"], tally.agreed["update_record"] = 3000, 2999
    text = _printed(FidelityReport([FidelityResult("records", None, tally)], 0, 100, "inprocess"))
    assert "99.9 %" in text and "100.0 %" not in text


def test_the_policy_columns_do_not_read_as_the_worlds_answer(tmp_path):
    result = _invoke("run", str(REFUSED), "--runtime", "inprocess", "--markdown", str(tmp_path / "r.md"),
                     "--html", str(tmp_path / "html"))
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if "turn" in line and "call" in line)
    assert re.search(r"stub world .* real world .* policy at proposal .* policy at commit .* class", header), header
    assert "| turn | call | tool | stub world | real world | policy at proposal | policy at commit |" in (
        tmp_path / "r.md").read_text()
    page = next((tmp_path / "html").glob("mass-delete*.html")).read_text()
    assert "<th>policy at commit</th>" in page and "<th>real world</th>" in page
    # the graph's node title: the policy's verdicts, then what the worlds answered
    assert "policy: deny at proposal, allow at commit · as alice\nworlds: stub ok -4, real error 403" in page


def test_the_revalidate_help_explains_the_cells():
    text = _invoke("revalidate", "--help").stdout
    assert "+N created, ~N changed, -N deleted" in " ".join(text.split())
    assert "+N created" in " ".join(_invoke("run", "--help").stdout.split())


def test_a_finding_line_is_never_wrapped_when_not_on_a_terminal():
    result = _invoke("run", str(REFUSED), "--runtime", "inprocess")
    lead = [line for line in result.stdout.splitlines() if line.startswith("  = over_penalised")]
    assert len(lead) == 1 and lead[0].rstrip().endswith("no check of the benchmark replayed"), result.stdout
    finding = [line for line in result.stdout.splitlines() if line.startswith("  ! critical_decision")]
    assert finding and finding[0].rstrip().endswith(")"), result.stdout


# --- nothing a benchmark prints reaches stdout -----------------------------------------------------------


def test_quiet_stdout_drops_only_its_own_threads_prints(capsys):
    inside, outside = threading.Event(), threading.Event()

    def benchmark_code() -> None:
        with quiet_stdout():
            inside.set()
            outside.wait(10)
            print("printed by the benchmark")
            with quiet_stdout():
                print("nested, also dropped")
            print("still inside")

    worker = threading.Thread(target=benchmark_code)
    worker.start()
    inside.wait(10)
    print("the table, printed meanwhile by another thread")
    outside.set()
    worker.join(10)
    print("after")
    out = capsys.readouterr().out
    assert out == "the table, printed meanwhile by another thread\nafter\n"


def _silent_check_run(tmp_path: Path) -> Path:
    """An AgentDojo run whose replayed security check prints (slack injection_task_2 prints the page it finds
    lacking a word): the posted page's text is changed."""
    run = json.loads(AGENTDOJO_RUN.read_text())
    for message in run["messages"]:
        for call in message.get("tool_calls") or ():
            if call.get("function") == "post_webpage":
                call["args"]["content"] = "a page without the words the check wants: PRINTED-BY-THE-CHECK"
    path = tmp_path / "runs" / "run.json"
    path.parent.mkdir()
    path.write_text(json.dumps(run))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("jobs", ["1", "2"])
def test_nothing_agentdojo_prints_reaches_the_tables_stdout(tmp_path, jobs):
    pytest.importorskip("agentdojo")
    run = _silent_check_run(tmp_path)
    done = subprocess.run([sys.executable, "-m", "litmus_replay", "revalidate", str(run.parent), "--format", "agentdojo",
                           "--out", str(tmp_path / "out"), "--jobs", jobs, "--runtime", "inprocess", "--no-reports"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("re-validation of 1 run"), done.stdout
    assert "PRINTED-BY-THE-CHECK" not in done.stdout + done.stderr
    assert "security 0/1" in done.stdout, "the check ran, and judged the changed page"


# --- the runtime's note, once per batch --------------------------------------------------------------


def test_a_workers_notes_are_kept_for_its_chunk_not_printed(capsys):
    from litmus_replay.replay.batch import worker

    log = logging.getLogger("litmus_replay.envs")
    with worker._taking_notes() as notes:
        log.warning("litmus-replay: the %s runtime cannot host domains %s", "sandbox", "d")
    assert notes == ["the sandbox runtime cannot host domains d"]
    assert capsys.readouterr().err == ""


@pytest.mark.slow
def test_the_runtimes_note_is_said_once_per_batch_however_many_workers(tmp_path):
    pytest.importorskip("agentdojo")
    runs = tmp_path / "runs"
    runs.mkdir()
    source = ROOT / "tests" / "fixtures" / "external" / "agentdojo-runs"
    for number, path in enumerate(sorted(source.glob("*/banking/*/*/*.json"))[:12]):
        (runs / f"{number}.json").write_text(path.read_text())
    done = subprocess.run([sys.executable, "-m", "litmus_replay", "revalidate", str(runs), "--format", "agentdojo",
                           "--out", str(tmp_path / "out"), "--jobs", "3", "--runtime", "sandbox", "--no-reports"],
                          capture_output=True, text=True, timeout=600)
    if "--runtime" in done.stderr and done.returncode == 2:
        pytest.skip(done.stderr.strip())
    assert done.returncode == 0, done.stderr[-2000:]
    notes = [line for line in done.stderr.replace("\r", "\n").splitlines() if "cannot host domains agentdojo-banking" in line]
    assert len(notes) == 1, done.stderr
    assert notes[0].startswith("litmus-replay: note: the sandbox runtime cannot host domains agentdojo-banking")
    quiet = subprocess.run([sys.executable, "-m", "litmus_replay", "revalidate", str(runs), "--format", "agentdojo",
                            "--out", str(tmp_path / "out2"), "--jobs", "2", "--runtime", "sandbox", "--no-reports", "-q"],
                           capture_output=True, text=True, timeout=600)
    assert quiet.returncode == 0, quiet.stderr[-2000:]  # no progress bar; the runtime's note, a warning, stays
    assert [line for line in quiet.stderr.splitlines() if line] == notes, quiet.stderr[-2000:]
    assert quiet.stdout.startswith("re-validation of 12 runs")


def test_revalidate_verbose_lists_the_flagged_runs(tmp_path):
    pytest.importorskip("agentdojo")
    runs = tmp_path / "runs"
    runs.mkdir()
    source = ROOT / "tests" / "fixtures" / "external"
    flagged = source / "agentdojo-runs" / "gpt-4o-mini-2024-07-18" / "slack" / "user_task_4" / "important_instructions"
    (runs / "flagged.json").write_text((flagged / "injection_task_4.json").read_text())  # check_missed_harm
    (runs / "stands.json").write_text((source / "agentdojo" / "none.json").read_text())
    args = ("revalidate", str(runs), "--format", "agentdojo", "--runtime", "inprocess", "--jobs", "1", "--no-reports")
    normal = _invoke(*args, "--out", str(tmp_path / "n"))
    assert normal.exit_code == 0, normal.output
    assert "flagged runs" not in normal.stdout
    verbose = _invoke(*args, "--out", str(tmp_path / "v"), "-v")
    assert verbose.exit_code == 0, verbose.output
    lines = verbose.stdout.splitlines()
    at = lines.index("flagged runs (1):")
    assert lines[at + 1].startswith("  gpt-4o-mini-2024-07-18/slack/user_task_4/important_instructions/injection_task_4: "
                                    "check_missed_harm — "), lines[at + 1]
    quiet = _invoke(*args, "--out", str(tmp_path / "q"), "-q")
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.stderr
    assert quiet.stdout.startswith("re-validation of 2 runs")


def test_the_index_page_knows_its_filters_values(tmp_path):
    """The page's script says an unknown filter or value in the address (the browser test watches it do so)."""
    from litmus_replay.replay.batch import as_line, summarise
    from litmus_replay.replay.report.batch_index import write_batch_index

    line = {"run": "r1", "file": "f", "trajectory": "r1", "task": "t", "original": "safe", "status": "ok",
            "revalidated": "confirmed_safe", "finding": "stands", "report": None}
    write_batch_index(tmp_path / "index.html", [as_line(line)], summarise([line]))
    page = (tmp_path / "index.html").read_text()
    assert '<p class="problems" id="filter-problem" role="alert" hidden></p>' in page
    assert '"known":{"class":["confirmed_misuse",' in page and '"finding":["incomplete",' in page
    assert "unknown value for the filter " in page and "unknown filter " in page
