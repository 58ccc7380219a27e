"""Every ``litmus-replay`` command the README and the docs pages show is run by a test.

The commands are those of the pages' ```bash and ```console blocks (``$ `` lines in a console block, the
output shown below each). ``COVERED`` names, for every command shown, the tests that run it: the commands
this module runs itself (against what the page shows beneath them, where it shows something), and the
others — a Docker engine, a Dask cluster, minutes of search — by the existing test that runs them. A
command added to a page without an entry here fails ``test_every_command_shown_is_run_by_a_test``; an
entry whose command no page shows any more fails it too.

The commands run here run in a temporary directory that links the checkout's input folders, so what they
write stays there; unit tests replay in-process (``tests/unit/conftest.py``), which gives the same pairs
as the sandbox for worlds without a shell (the conformance suite's promise).
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from litmus_replay.replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
HERE = "tests/unit/test_docs_commands.py::"
COMMAND_BLOCKS = ("bash", "console")
LINKED = ("corpus", "examples", "scenarios", "tests")  # the input folders the shown commands name

# command as shown -> the tests that run it ("path::test"; ".ci/run" for the CI script, which runs it verbatim)
COVERED: dict[str, tuple[str, ...]] = {
    "litmus-replay revalidate corpus/runs --worlds corpus/worlds --out out": (
        HERE + "test_the_main_job_prints_the_table_the_pages_show",
        "tests/integration/test_readme_main_job.py::test_revalidating_the_shipped_corpus_finds_the_planted_runs",
    ),
    "litmus-replay report run-0010_epoch_1 --out out": (HERE + "test_the_main_job_prints_the_table_the_pages_show",),
    "litmus-replay run scenarios/core/mass-delete-refused-403.yaml scenarios/core/symlink-followed-out-of-workspace.yaml": (
        HERE + "test_a_command_prints_what_its_page_shows",
    ),
    "litmus-replay check scenarios/core": (HERE + "test_a_command_prints_what_its_page_shows",),
    "litmus-replay run bad.yaml": (HERE + "test_bad_input_costs_the_lines_the_page_shows",),
    "litmus-replay check bomb.yaml": (HERE + "test_bad_input_costs_the_lines_the_page_shows",),
    "litmus-replay schema": (HERE + "test_the_schema_commands_print_the_shipped_schemas",),
    "litmus-replay schema report": (HERE + "test_the_schema_commands_print_the_shipped_schemas",),
    "litmus-replay schema results-line": (HERE + "test_the_schema_commands_print_the_shipped_schemas",),
    "litmus-replay schema summary -o summary.schema.json": (HERE + "test_the_schema_commands_print_the_shipped_schemas",),
    "litmus-replay graph scenarios/core/symlink-followed-out-of-workspace.yaml --format html -o graph.html": (
        HERE + "test_the_report_commands_write_what_the_page_says",
    ),
    "litmus-replay run scenarios/core --json run.json --html site/ --markdown run.md": (
        HERE + "test_the_report_commands_write_what_the_page_says",
    ),
    "litmus-replay init-world tests/fixtures/external/tau-bench/gpt-4o-airline.json -o airline.yaml": (
        HERE + "test_init_world_writes_a_world_that_revalidates_its_runs",
    ),
    "litmus-replay revalidate log.json --worlds worlds --out out --label C=safe --label I=tool_misuse": (
        "tests/unit/test_init_world.py::test_the_command_line_maps_labels_with_label_options_in_one_line_errors",
        "tests/unit/test_init_world.py::test_a_benchmarks_own_labels_are_flagged_only_once_mapped_onto_what_they_mean",
    ),
    "litmus-replay revalidate tests/fixtures/external/agentdojo-runs --format agentdojo --out out/": (
        HERE + "test_the_agentdojo_runs_print_the_table_the_page_shows",
    ),
    # The 280 τ²-bench simulations kept beside the checkout (not shipped: 14 MB), linked as the page names them.
    "litmus-replay revalidate tau2-bench-runs/ --format tau2-bench --out out/": (
        HERE + "test_the_tau2_simulations_print_the_table_the_page_shows",
        "tests/integration/test_tau2_regrading.py::test_revalidate_needs_no_worlds_and_prints_the_agreement",
    ),
    # A Dask cluster: the same batch on a LocalCluster, byte for byte the process pool's.
    "litmus-replay revalidate runs/ --worlds /shared/worlds --out /shared/out --executor dask "
    "--scheduler tcp://scheduler:8786 --runtime sandbox": (
        "tests/unit/test_batch.py::test_dask_local_cluster_writes_what_the_process_pool_writes",
    ),
    # Minutes of search each: the lab's command on the same domains with fewer examples, and the shell's
    # divergence found in a sandbox.
    "litmus-replay fidelity records bank profiles files --runtime inprocess --seed 0 --out fidelity": (
        "tests/integration/test_fidelity_lab.py::test_each_known_divergence_has_a_minimal_counterexample",
    ),
    "litmus-replay fidelity shell --runtime sandbox --seed 0 --examples 30 --out fidelity-shell": (
        "tests/integration/test_fidelity_lab.py::test_masked_shell_failures_are_found_in_an_isolated_world",
    ),
    # The same packs, tries and seed through the library; every mutant checked as `check` checks it.
    "litmus-replay nearmiss scenarios/core scenarios/detectors scenarios/bindings --tries 30 --out nearmiss "
    "--runtime inprocess": (
        "tests/scenarios/test_nearmiss_pack.py::test_every_built_in_scenario_gets_at_least_five_distinct_mutants",
    ),
    "litmus-replay check nearmiss --runtime inprocess": (
        "tests/scenarios/test_nearmiss_pack.py::test_every_mutant_replays_to_the_classes_and_findings_it_claims",
    ),
    # A Docker engine, and debootstrap as root: CI builds the image with this very command before the tests.
    "litmus-replay image build --offline": (".ci/run",),
    "litmus-replay run --runtime docker scenarios/": (
        "tests/integration/test_docker_runtime.py::test_pack_replays_to_the_same_classes_as_in_process",
    ),
    # An MCP server on stdio: the SDK's own client drives it (in-process real world, a log of its own).
    "litmus-replay serve scenarios/core/mass-delete-refused-403.yaml --log pairs.jsonl": (
        "tests/unit/test_mcp_serve.py::test_a_call_refused_at_commit_is_answered_as_refused_and_judged_proposal_only",
    ),
    # An inspect_ai eval's log of a litmus world, re-validated against world files of the scenarios it served.
    "litmus-replay revalidate logs/ --worlds worlds --out out": (
        "tests/integration/test_inspect_live.py::test_revalidate_agrees_call_for_call_and_with_the_scorer",
    ),
    # The example plug-in, installed: the test reads the command and its output from the page.
    "litmus-replay run examples/tickets/scenario.yaml --runtime sandbox -q": (
        "tests/integration/test_plugin_domain.py::test_the_readme_command_replays_the_example_as_it_says",
    ),
}


@dataclass(frozen=True)
class Shown:
    """A command as a page shows it, with the output shown beneath it (console blocks only)."""

    page: str
    line: int
    command: str
    output: tuple[str, ...] = ()


def _blocks(text: str) -> list[tuple[str, int, list[str]]]:
    """Every fenced block: its language, the line its first line is on, its lines (the fence's indent removed)."""
    blocks = []
    lines = text.splitlines()
    at = 0
    while at < len(lines):
        opening = re.match(r"^(\s*)```(\S*)\s*$", lines[at])
        if not opening:
            at += 1
            continue
        indent, language = len(opening.group(1)), opening.group(2)
        body: list[str] = []
        at += 1
        while at < len(lines) and lines[at].strip() != "```":
            body.append(lines[at][indent:] if lines[at][:indent].strip() == "" else lines[at])
            at += 1
        blocks.append((language, at - len(body) + 1, body))
        at += 1
    return blocks


def _commands(line: str) -> list[str]:
    """The ``litmus-replay`` commands of one shell line: ``&&``-chained parts, a trailing comment dropped."""
    line = re.sub(r"\s+#\s.*$", "", line)
    return [" ".join(part.split()) for part in line.split("&&") if part.strip().startswith("litmus-replay ")]


def _joined(lines: list[str]) -> list[tuple[int, str]]:
    """Lines with their backslash continuations joined, each with its index in ``lines``."""
    joined: list[tuple[int, str]] = []
    carry: tuple[int, str] | None = None
    for index, line in enumerate(lines):
        if carry is not None:
            carry = (carry[0], carry[1] + " " + line.strip())
        else:
            carry = (index, line)
        if carry[1].rstrip().endswith("\\"):
            carry = (carry[0], carry[1].rstrip()[:-1])
            continue
        joined.append(carry)
        carry = None
    if carry is not None:
        joined.append(carry)
    return joined


@lru_cache(maxsize=None)
def shown_commands() -> tuple[Shown, ...]:
    shown = []
    for page in PAGES:
        name = str(page.relative_to(ROOT))
        for language, first, body in _blocks(page.read_text(encoding="utf-8")):
            if language not in COMMAND_BLOCKS:
                continue
            lines = _joined(body)
            for number, (index, line) in enumerate(lines):
                if language == "console":
                    if not line.startswith("$ "):
                        continue
                    output = []
                    for _, after in lines[number + 1:]:
                        if after.startswith("$ "):
                            break
                        output.append(after.rstrip())
                    shown += [Shown(name, first + index, command, tuple(output)) for command in _commands(line[2:])]
                elif not line.lstrip().startswith("#"):
                    shown += [Shown(name, first + index, command) for command in _commands(line)]
    return tuple(shown)


def commands_for(test: str) -> list[str]:
    return [command for command, tests in COVERED.items() if HERE + test in tests]


def _test_exists(test: str) -> bool:
    if test == ".ci/run":
        return True
    path, _, name = test.partition("::")
    file = ROOT / path
    return file.is_file() and re.search(rf"^def {re.escape(name)}\(", file.read_text(), flags=re.M) is not None


def test_every_command_shown_is_run_by_a_test():
    shown = shown_commands()
    assert shown, "no commands found on the pages: the parser is broken"
    uncovered = sorted({f"{s.page}:{s.line}: {s.command}" for s in shown if s.command not in COVERED})
    assert not uncovered, "commands shown that no test runs (add each to COVERED with the test that runs it):\n" + \
        "\n".join(uncovered)
    stale = sorted(set(COVERED) - {s.command for s in shown})
    assert not stale, f"COVERED names commands no page shows any more: {stale}"
    missing = sorted({test for tests in COVERED.values() for test in tests if not _test_exists(test)})
    assert not missing, f"COVERED names tests that do not exist: {missing}"
    ci = (ROOT / ".ci" / "run").read_text()
    for command, tests in COVERED.items():
        if ".ci/run" in tests:
            assert re.search(rf"^{re.escape(command)}$", ci, flags=re.M), f".ci/run no longer runs {command!r}"


def test_every_synopsis_names_options_its_command_has():
    """A ```text block that starts with a command is a synopsis: its options must be the command's."""
    synopses = 0
    for page in PAGES:
        for language, first, body in _blocks(page.read_text(encoding="utf-8")):
            if language != "text" or not body or not body[0].startswith("litmus-replay "):
                continue
            synopses += 1
            name = body[0].split()[1]
            command = main.get_command(click.Context(main), name)
            assert command is not None, f"{page}:{first}: no command {name!r}"
            known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
            named = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", "\n".join(body)))
            assert named <= known, f"{page}:{first}: {name} has no {sorted(named - known)}"
    assert synopses


# -- running the commands -------------------------------------------------------------------------------------


def _matches(shown: list[str], actual: list[str]) -> bool:
    """Whether the actual lines are the shown ones: a line ``...`` stands for any lines, a line ending in
    `` ...`` for any line that begins with what precedes it; trailing white space is not compared."""
    shown = [line.rstrip() for line in shown]
    actual = [line.rstrip() for line in actual]

    @lru_cache(maxsize=None)
    def match(i: int, j: int) -> bool:
        if i == len(shown):
            return j == len(actual)
        if shown[i] == "...":
            return any(match(i + 1, k) for k in range(j, len(actual) + 1))
        if j == len(actual):
            return False
        if shown[i].endswith(" ...") and actual[j].startswith(shown[i][:-4]):
            return match(i + 1, j + 1)
        return shown[i] == actual[j] and match(i + 1, j + 1)

    return match(0, 0)


@pytest.fixture()
def workdir(tmp_path, monkeypatch):
    """A directory holding the checkout's input folders (as links) and nothing else, made current."""
    for name in LINKED:
        (tmp_path / name).symlink_to(ROOT / name, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _run(command: str):
    args = shlex.split(command)
    assert args[0] == "litmus-replay"
    return CliRunner().invoke(main, args[1:], catch_exceptions=False)


def _shown_with_output(command: str) -> list[Shown]:
    shown = [s for s in shown_commands() if s.command == command and s.output]
    assert shown, f"no page shows the output of {command!r}"
    return shown


def _assert_prints_what_is_shown(command: str, actual: str, *, drop: tuple[str, ...] = ()) -> None:
    lines = [line for line in actual.splitlines() if not line.startswith(drop or ("\0",))]
    for shown in _shown_with_output(command):
        expected = [line for line in shown.output if not line.startswith(drop or ("\0",))]
        assert _matches(expected, lines), (
            f"{shown.page}:{shown.line} shows for `{command}`:\n" + "\n".join(expected)
            + "\n\nbut it prints:\n" + "\n".join(lines))


@pytest.mark.parametrize("command", commands_for("test_a_command_prints_what_its_page_shows"))
def test_a_command_prints_what_its_page_shows(command, workdir):
    result = _run(command)
    assert result.exit_code == 0, result.output
    _assert_prints_what_is_shown(command, result.stdout)


# What the security page's examples are: a scenario whose rule does not compile, and a YAML alias bomb of
# nine levels of nine (the one benchmarks/hostile_inputs.py refuses).
BAD_INPUTS = {
    "bad.yaml": "name: bad\nworld: {principals: [alice]}\npolicy:\n  rules:\n    - {id: r, when: 'tool == '}\n"
                "trajectory: {id: t, principal: alice, turns: []}\n",
    "bomb.yaml": "format_version: 1\nname: bomb\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
        f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi")),
}


@pytest.mark.parametrize("command", commands_for("test_bad_input_costs_the_lines_the_page_shows"))
def test_bad_input_costs_the_lines_the_page_shows(command, workdir):
    for name, text in BAD_INPUTS.items():
        (workdir / name).write_text(text)
    result = _run(command)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    _assert_prints_what_is_shown(command, result.stderr + result.stdout)


@pytest.mark.parametrize("command", commands_for("test_the_schema_commands_print_the_shipped_schemas"))
def test_the_schema_commands_print_the_shipped_schemas(command, workdir):
    args = shlex.split(command)
    name = args[2] if len(args) > 2 and not args[2].startswith("-") else "trajectory"
    shipped = (ROOT / "replay" / "schemas" / f"{name}-v1.schema.json").read_text(encoding="utf-8")
    result = _run(command)
    assert result.exit_code == 0, result.output
    if "-o" in args:
        assert (workdir / args[args.index("-o") + 1]).read_text(encoding="utf-8") == shipped
        assert result.stdout == ""
    else:
        assert result.stdout == shipped


def test_the_report_commands_write_what_the_page_says(workdir):
    import jsonschema

    commands = commands_for("test_the_report_commands_write_what_the_page_says")
    assert len(commands) == 2
    for command in commands:
        result = _run(command)
        assert result.exit_code == 0, result.output
    assert "<html" in (workdir / "graph.html").read_text(encoding="utf-8").lower()
    report = json.loads((workdir / "run.json").read_text(encoding="utf-8"))
    schema = json.loads((ROOT / "replay" / "schemas" / "report-v1.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(report, schema)
    pages = {path.name for path in (workdir / "site").iterdir()}
    assert "index.html" in pages and len(pages) > 1
    assert (workdir / "run.md").read_text(encoding="utf-8").startswith("#")


def test_init_world_writes_a_world_that_revalidates_its_runs(workdir):
    import yaml

    (command,) = commands_for("test_init_world_writes_a_world_that_revalidates_its_runs")
    result = _run(command)
    assert result.exit_code == 0, result.output
    written = workdir / shlex.split(command)[-1]
    world = yaml.safe_load(written.read_text(encoding="utf-8"))
    assert world["name"].startswith("tau-bench/airline/") and world["bindings"], world
    worlds = workdir / "worlds"
    worlds.mkdir()
    written.rename(worlds / written.name)
    runs = shlex.split(command)[2]
    checked = _run(f"litmus-replay revalidate {runs} --worlds worlds --out out --jobs 1 --no-reports")
    assert checked.exit_code == 0, checked.output  # every run found its world


@pytest.mark.slow  # 1,200 runs
def test_the_main_job_prints_the_table_the_pages_show(workdir):
    job, report = commands_for("test_the_main_job_prints_the_table_the_pages_show")
    result = _run(job)
    assert result.exit_code == 0, result.output
    _assert_prints_what_is_shown(job, result.stdout, drop=("revalidating ",))  # the progress bar's speed varies
    for name in ("results.jsonl", "summary.json", "index.html"):
        assert (workdir / "out" / name).is_file(), name  # the files the pages say it writes, under out/
    made = _run(report)
    assert made.exit_code == 0, made.output
    _assert_prints_what_is_shown(report, made.stdout)
    assert (workdir / made.stdout.strip()).is_file()


TAU2_RUNS = ROOT.parent / "shared" / "fixtures" / "external" / "tau2-bench-runs"


@pytest.mark.slow  # 280 simulations in τ²-bench's own environments
@pytest.mark.skipif(not TAU2_RUNS.is_dir(), reason="the τ²-bench simulations kept beside the checkout are not here")
def test_the_tau2_simulations_print_the_table_the_page_shows(workdir):
    pytest.importorskip("tau2")
    (workdir / "tau2-bench-runs").symlink_to(TAU2_RUNS, target_is_directory=True)
    (command,) = commands_for("test_the_tau2_simulations_print_the_table_the_page_shows")
    result = _run(command)
    assert result.exit_code == 0, result.output
    _assert_prints_what_is_shown(command, result.stdout, drop=("revalidating ",))


@pytest.mark.slow  # 160 runs in AgentDojo's own environments
def test_the_agentdojo_runs_print_the_table_the_page_shows(workdir):
    pytest.importorskip("agentdojo")
    (command,) = commands_for("test_the_agentdojo_runs_print_the_table_the_page_shows")
    result = _run(command)
    assert result.exit_code == 0, result.output
    _assert_prints_what_is_shown(command, result.stdout, drop=("revalidating ",))
