"""The ``litmus-replay`` command line.

Bad input never costs a traceback: it is one line naming the file and the field, and exit status 2.
In a run over many scenarios a bad one is reported and skipped; the rest still replay and the JSON
report still holds them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click
from rich.console import Console

from litmus_replay.envs import RuntimeUnavailable
from litmus_replay.envs.runtime import UnknownRuntime, get_runtime, runtime_names

from . import __version__
from .engine import Replayer, TrajectoryReplay
from .errors import InputError
from .model import json_schema
from .report import print_run_summary, print_trajectory, run_document, write_json
from .scenario import Scenario, find_scenarios, load_scenario

EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2


def _fail(message: str) -> None:
    click.echo(f"litmus-replay: error: {message}", err=True)


def _console() -> Console:
    """A console as wide as the terminal, or wide enough for the table when writing to a pipe or log."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=160)
    return console


def _runtime_option(func):
    return click.option(
        "--runtime",
        default="inprocess",
        show_default=True,
        metavar="NAME",
        help=f"Where the real world runs ({', '.join(runtime_names())}).",
    )(func)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="litmus-replay")
def main() -> None:
    """Replay recorded agent trajectories into a stub world and a real world, and score every tool call
    as a (proposal, commit) pair."""


def _replay_scenarios(paths: tuple[str, ...], runtime: str) -> tuple[list[tuple[Scenario, TrajectoryReplay, list[str]]], list[str]]:
    """Load and replay every scenario; collect bad input as one-line errors instead of stopping."""
    errors: list[str] = []
    try:
        files = find_scenarios(list(paths))
        real_runtime = get_runtime(runtime)
    except InputError as exc:
        _fail(exc.line())
        return [], [exc.line()]
    except (UnknownRuntime, RuntimeUnavailable) as exc:
        _fail(f"--runtime: {exc}")
        return [], [f"--runtime: {exc}"]
    done = []
    with real_runtime:
        for file in files:
            try:
                scenario = load_scenario(file)
            except InputError as exc:
                errors.append(exc.line())
                _fail(exc.line())
                continue
            replayer = Replayer(scenario.policy, real_runtime=real_runtime)
            for trajectory in scenario.trajectories:
                result = replayer.replay(trajectory, scenario.spec.world, scenario.name)
                classes = {call.key: call.pair.cls for call in result.calls}
                reasons = {call.key: call.pair.reason for call in result.calls}
                problems = scenario.check(classes, reasons, result.revalidation.revalidated)
                done.append((scenario, result, problems))
    return done, errors


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the whole result as JSON here.")
@_runtime_option
@click.option("-q", "--quiet", is_flag=True, help="Print only the summary line.")
def run(paths: tuple[str, ...], json_path: str | None, runtime: str, quiet: bool) -> None:
    """Replay scenario files (or directories of them) and print each call's pair."""
    console = _console()
    done, errors = _replay_scenarios(paths, runtime)
    checks = {}
    for scenario, result, problems in done:
        if not quiet:
            print_trajectory(console, result, problems if scenario.spec.expect else None)
        if scenario.spec.expect:
            checks[f"{scenario.name}/{result.trajectory.id}"] = problems
    failed = sum(1 for problems in checks.values() if problems)
    print_run_summary(console, [r for _, r, _ in done], failed, len(checks), len(errors))
    if json_path:
        write_json(run_document([r for _, r, _ in done], errors, checks), json_path)
    if errors:
        sys.exit(EXIT_BAD_INPUT)
    if failed:
        sys.exit(EXIT_MISMATCH)


@main.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@_runtime_option
def check(paths: tuple[str, ...], runtime: str) -> None:
    """Validate scenarios and replay them against their expected classes; exit 1 on a mismatch."""
    done, errors = _replay_scenarios(paths, runtime)
    failed = 0
    for scenario, result, problems in done:
        label = f"{scenario.path}: {scenario.name}/{result.trajectory.id}"
        if not scenario.spec.expect:
            click.echo(f"{label}: ok (no expectations) — {result.revalidation.revalidated.value}")
        elif problems:
            failed += 1
            click.echo(f"{label}: FAILED — " + "; ".join(problems))
        else:
            click.echo(f"{label}: ok — {result.revalidation.revalidated.value}")
    if errors:
        sys.exit(EXIT_BAD_INPUT)
    if failed:
        sys.exit(EXIT_MISMATCH)


@main.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file instead of stdout.")
def schema(output: str | None) -> None:
    """Print the JSON Schema of the native trajectory format (one JSONL line)."""
    text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)


if __name__ == "__main__":  # pragma: no cover
    main()
