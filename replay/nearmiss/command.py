"""``litmus-replay nearmiss SCENARIO...``: near-miss scenarios one step from the decision boundary, shrunk to
their minimal change, with a summary of what the suite covers."""

from __future__ import annotations

import sys
import zlib
from pathlib import Path

import click

from litmus_replay.envs import RuntimeUnavailable
from litmus_replay.envs.runtime import Runtime, UnknownRuntime, get_runtime, runtime_names

from ..cli_common import QUIET, os_reason, verbosity, verbosity_options
from ..errors import InputError, ScenarioError
from ..scenario import SCENARIO_SUFFIXES, find_scenarios
from .search import DEFAULT_COUNT, DEFAULT_TRIES, Search
from .seed import Seed, SeedReplayer, seeds_from_runs, seeds_from_scenario
from .summary import SeedResult, summary, summary_lines, write_summary
from .writer import write_mutants

__all__ = ["generate", "nearmiss_command"]

EXIT_BAD_INPUT = 2


def _fail(message: str) -> None:
    click.echo(f"litmus-replay: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def seed_number(seed: int, name: str) -> int:
    """A seed's own search seed: stable across processes (unlike ``hash`` of a string)."""
    return zlib.crc32(f"{seed}/{name}".encode()) ^ (seed & 0xFFFFFFFF)


def generate(seeds: list[Seed], out: Path, count: int = DEFAULT_COUNT, tries: int = DEFAULT_TRIES, seed: int = 0,
             real_runtime: Runtime | None = None) -> tuple[list[SeedResult], dict]:
    """Search every seed, write its kept mutants under ``out`` and the suite's ``summary.json``."""
    replayer = SeedReplayer(real_runtime)
    results = []
    for original in seeds:
        original.prepare(replayer)
        search = Search(original, replayer, tries, seed_number(seed, original.name))
        mutants = search.run(count)
        files = write_mutants(original, mutants, out) if mutants else []
        results.append(SeedResult(original.name, original.source, search.replayed, mutants, files, original, search))
    out.mkdir(parents=True, exist_ok=True)
    document = summary(results, out)
    write_summary(document, out)
    return results, document


@click.command("nearmiss")
@click.argument("scenarios", nargs=-1, required=True, type=click.Path())
@click.option("--count", default=DEFAULT_COUNT, show_default=True, type=click.IntRange(1),
              help="Mutants to keep per scenario trajectory.")
@click.option("--tries", default=DEFAULT_TRIES, show_default=True, type=click.IntRange(1),
              help="Single edits to try, and as many combinations of two or three.")
@click.option("--seed", default=0, show_default=True, type=int, help="The same seed writes byte-identical files.")
@click.option("--out", "out_dir", default="nearmiss", show_default=True, type=click.Path(file_okay=False),
              help="Where the scenario files and summary.json go.")
@click.option("--runtime", default="sandbox", envvar="LITMUS_RUNTIME", show_default=True, metavar="NAME",
              help=f"Where the real world runs ({', '.join(runtime_names())}); the stub runs in-process.")
@click.option("--worlds", "worlds_dir", type=click.Path(),
              help="Worlds directory for run files (as revalidate's); world providers such as AgentDojo's answer too.")
@click.option("--format", "fmt", default="auto", show_default=True, help="Trajectory format of run files.")
@verbosity_options(quiet="Print only the last line (what was written where).")
def nearmiss_command(scenarios: tuple[str, ...], count: int, tries: int, seed: int, out_dir: str, runtime: str,
                     worlds_dir: str | None, fmt: str) -> None:
    """Mutate each SCENARIO's trajectory (plausibly: every argument one its agent could have produced) and
    keep the mutants whose pair classes or findings differ from the original's, or that one more change
    would flip; each is shrunk to its minimal change and written as a scenario `check` replays.

    SCENARIO is a scenario file, a directory of them (a whole pack), or a recorded run file (any format
    revalidate reads) whose world a worlds directory or a world provider serves, as for AgentDojo runs."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        _fail(f"--out: {out} is not a directory")
    seeds: list[Seed] = []
    try:
        for raw in scenarios:
            path = Path(raw)
            if path.is_dir() or path.suffix in SCENARIO_SUFFIXES or not path.exists():
                files = find_scenarios([raw])
                if path.is_dir() and not files:
                    raise ScenarioError(raw, None, "no scenario files (*.yaml, *.yml) in this directory")
                for file in files:
                    seeds.extend(seeds_from_scenario(file))
            else:
                seeds.extend(seeds_from_runs(path, fmt, worlds_dir))
    except InputError as exc:
        _fail(exc.line())
    try:
        real_runtime = get_runtime(runtime)
    except (UnknownRuntime, RuntimeUnavailable) as exc:
        _fail(f"--runtime: {exc}")
    with real_runtime:
        try:
            results, document = generate(seeds, out, count, tries, seed, real_runtime)
        except OSError as exc:
            _fail(f"{getattr(exc, 'filename', None) or out}: cannot write the scenarios: {os_reason(exc)}")
    if verbosity() > QUIET:
        for result in results:
            click.echo(f"{result.name}: {len(result.mutants)} kept of {result.tried} tried")
        for line in summary_lines(document):
            click.echo(line)
    click.echo(f"wrote {document['mutants']} scenarios and summary.json to {out}")
