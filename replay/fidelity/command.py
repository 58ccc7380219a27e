"""``litmus-replay fidelity DOMAIN...``: measure how faithful domains' stubs are to their real twins."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from litmus_replay.envs import RuntimeUnavailable
from litmus_replay.envs.domain import domain_class, domain_names
from litmus_replay.envs.errors import UnknownDomain
from litmus_replay.envs.runtime import UnknownRuntime, get_runtime, runtime_names

from ..cli_common import QUIET, VERBOSE, os_reason, output_console, verbosity, verbosity_options
from ..errors import UnknownName
from .lab import DEFAULT_EXAMPLES, DEFAULT_STEPS, measure
from .report import FidelityReport, print_report, write_report
from .scenarios import write_counterexample
from .registry import ENTRY_POINT_GROUP, get_space, space_names
from .space import stub_profiles

EXIT_BAD_INPUT = 2


def _fail(message: str) -> None:
    click.echo(f"litmus-replay: error: {message}", err=True)
    sys.exit(EXIT_BAD_INPUT)


def targets(names: tuple[str, ...]) -> list[tuple[str, str]]:
    """``DOMAIN`` (every profile of its stub) or ``DOMAIN:PROFILE`` -> (domain, profile) pairs; bad names
    exit 2 with one line."""
    chosen: list[tuple[str, str]] = []
    for name in names or tuple(space_names()):
        domain, _, profile = name.partition(":")
        try:
            get_space(domain)
            profiles = stub_profiles(domain)
        except (UnknownName, UnknownDomain) as exc:
            if isinstance(exc, UnknownName) and not getattr(exc, "failure", None) and domain in domain_names():
                _fail(f"DOMAIN: {domain!r} is a domain, but no fidelity call space is registered for it: a "
                      f"distribution adds one by naming a CallSpace for {domain!r} in the entry-point group "
                      f"{ENTRY_POINT_GROUP!r} (or a program calls register_space); domains with one: "
                      f"{', '.join(space_names())}")
            _fail(f"DOMAIN: {exc}")
        if profile and profile not in profiles:
            _fail(f"DOMAIN: unknown stub profile {profile!r} of {domain}; choose one of: {', '.join(profiles)}")
        chosen.extend((domain, p) for p in ([profile] if profile else profiles))
    return chosen


@click.command("fidelity")
@click.argument("domains", nargs=-1)
@click.option("--examples", default=DEFAULT_EXAMPLES, show_default=True, type=click.IntRange(1),
              help="Call sequences per search round and for the agreement count.")
@click.option("--steps", default=DEFAULT_STEPS, show_default=True, type=click.IntRange(1), help="Longest call sequence.")
@click.option("--seed", default=0, show_default=True, type=int, help="The same seed gives the same report.")
@click.option("--runtime", default="sandbox", envvar="LITMUS_RUNTIME", show_default=True, metavar="NAME",
              help=f"Where the real twin runs ({', '.join(runtime_names())}); the stub runs in-process.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Write report.json, index.html and one scenario per counterexample here.")
@click.option("--json", "as_json", is_flag=True,
              help="Print report.json's document instead of the table: {format_version, seed, examples, runtime, "
                   "domains: [{domain, profile, agreement, examples, search_examples, calls_compared, "
                   "calls_after_divergence, error, tools: {TOOL: {calls, agreed, agreement, classes}}, classes, "
                   "kinds, counterexamples: [...]}]}.")
@verbosity_options(quiet="Print the table only, without the list of counterexamples.",
                   verbose="Also print each counterexample call by call, with both worlds' answers to the last.")
def fidelity_command(domains: tuple[str, ...], examples: int, steps: int, seed: int, runtime: str,
                     out_dir: str | None, as_json: bool) -> None:
    """Drive the same call sequences into each DOMAIN's stub and real twin, report agreement per tool and
    per divergence class, and shrink every distinct divergence to a minimal counterexample.

    DOMAIN is a domain name (every profile of its stub) or DOMAIN:PROFILE; none means every domain with a
    call space."""
    chosen = targets(domains)
    if runtime == "inprocess":  # a domain that executes what it is given has no real twin outside isolation
        confined = sorted({domain for domain, _ in chosen if get_space(domain).needs_isolation})
        if confined and domains:
            _fail(f"--runtime: {', '.join(confined)} runs its real twin only in an isolated runtime "
                  "(--runtime sandbox or docker)")
        chosen = [(domain, profile) for domain, profile in chosen if domain not in confined]
    console = output_console()
    out = Path(out_dir) if out_dir else None
    if out is not None and out.exists() and not out.is_dir():
        _fail(f"--out: {out} is not a directory")
    try:
        real_runtime = get_runtime(runtime)
    except (UnknownRuntime, RuntimeUnavailable) as exc:
        _fail(f"--runtime: {exc}")
    stub_runtime = get_runtime("inprocess")
    results = []
    with real_runtime:
        for domain, profile in chosen:
            space = get_space(domain)
            only_profile = list(domain_class(domain, "stub").profiles) == [profile]
            results.append(measure(space, stub_runtime, real_runtime, profile=None if only_profile else profile,
                                   examples=examples, seed=seed, steps=steps))
        report = FidelityReport(results, seed, examples, runtime)
        if out is not None:
            try:
                for result in results:
                    folder = out / "counterexamples" / result.label.replace(":", "-")
                    for index, example in enumerate(result.counterexamples, 1):
                        path = write_counterexample(example, folder, index, stub_runtime, real_runtime)
                        report.files[id(example)] = str(path)
                write_report(report, out)
            except OSError as exc:
                _fail(f"{getattr(exc, 'filename', None) or out}: cannot write the report: {os_reason(exc)}")
    if as_json:
        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
        return
    level = verbosity()
    print_report(report, console, counterexamples=level > QUIET, outcomes=level >= VERBOSE)
