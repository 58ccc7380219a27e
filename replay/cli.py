"""The ``litmus-replay`` command line.

Bad input never costs a traceback: it is one line naming the file and the field, and exit status 2.
In a run over many scenarios a bad one is reported and skipped; the rest still replay and the JSON
report still holds them.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import click
from rich.console import Console
from rich.progress import ProgressColumn
from rich.text import Text

from litmus_replay.envs import RuntimeUnavailable
from litmus_replay.envs.plugins import unexplained_failures
from litmus_replay.envs.runtimes.docker import clean_up_at_exit
from litmus_replay.envs.runtime import Runtime, UnknownRuntime, get_runtime, runtime_names, unknown_runtime

from . import __version__, limits
from .analysis import Analysis
from .cli_common import (QUIET, VERBOSE, fail as _fail, has_verbosity, os_reason, output_console, verbosity,
                         verbosity_options, verbosity_params, write_output)
from .errors import InputError, UnknownName
from .model import json_schema
from .report import (
    graph_document,
    plural,
    markdown_report,
    print_revalidation,
    print_run_summary,
    print_trajectory,
    run_document,
    to_dot,
    to_graphml,
    trajectory_html,
    write_html_dir,
    write_json,
)
from .report.atomic import write_atomic
from .report.cells import CELL_LEGEND
from .report.html import lead_text
from .report.visible import visible
from .runner import Batch, iter_scenario_runs
from .verdicts import FLAGGED

DEFAULT_RUNTIME = "sandbox"  # real semantics behind Linux namespaces: the embedded default
EXIT_MISMATCH = 1
EXIT_BAD_INPUT = 2
EXIT_NOT_REVALIDATED = 3  # revalidate: some run had no world or hit a harness error; its line says why


def _console() -> Console:
    """A console as wide as the terminal; writing to a pipe or log, wide enough for the table, and never
    wrapping a line."""
    return output_console()


def _note(text: str, warning: bool = False) -> None:
    """A note on stderr, unless ``-q``; a ``warning`` (a runtime isolating less than it can, a broken
    plug-in) is said with ``-q`` too."""
    if warning or verbosity() > QUIET:
        click.echo(visible(f"litmus-replay: note: {text}"), err=True)


def _usage_line(exc: click.UsageError) -> str:
    """Click's usage error in the project's one line: the option (or argument) and the problem, and where
    the command's help is."""
    ctx = exc.ctx
    param = getattr(exc, "param", None)
    if isinstance(exc, click.BadParameter) and param is not None:
        name = "/".join(param.opts) if isinstance(param, click.Option) else param.human_readable_name
        if isinstance(exc, click.MissingParameter):
            problem = f"a required {param.param_type_name}, not given"
        else:
            problem = exc.message
    elif isinstance(exc, click.BadOptionUsage):
        name, problem = exc.option_name, exc.message.replace(f"Option {exc.option_name!r} ", "")
    elif isinstance(exc, click.NoSuchOption):
        name, problem = exc.option_name, "no such option"
        if exc.possibilities:
            problem += f"; did you mean {' or '.join(exc.possibilities)}?"
    else:
        name, problem = None, exc.format_message()
    problem = problem.strip().rstrip(".")
    if problem[:1].isupper() and problem[1:2].islower():
        problem = problem[0].lower() + problem[1:]
    where = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
    return f"{name}: {problem}{where}" if name else f"{problem}{where}"


class _OneLineUsageError(click.UsageError):
    """A usage error said as every other error of the command line is: one line, exit status 2."""

    def show(self, file=None) -> None:
        _fail(self.message)


class _Group(click.Group):
    """A group whose usage errors (a bad option value, a missing option, an unknown option or command) are
    one line naming the option and the problem, exit status 2, like every other error; ``--help`` and a
    bare group's help are click's own. Click shows the error, so ``standalone_mode=False`` callers still
    get a :class:`click.UsageError` raised."""

    def make_context(self, info_name, args, parent=None, **extra):
        with _one_line_usage():
            return super().make_context(info_name, args, parent, **extra)

    def invoke(self, ctx: click.Context):
        with _one_line_usage():
            return super().invoke(ctx)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        """Every command takes -q and -v: one that declares neither is given them as the group's (quiet: no
        notes)."""
        if not has_verbosity(cmd):
            cmd.params.extend(verbosity_params())
        super().add_command(cmd, name)


_Group.group_class = _Group


@contextmanager
def _one_line_usage() -> Iterator[None]:
    try:
        yield
    except (_OneLineUsageError, click.exceptions.NoArgsIsHelpError):
        raise
    except click.UsageError as exc:
        raise _OneLineUsageError(_usage_line(exc), exc.ctx) from None


class _RateColumn(ProgressColumn):
    """Runs per second, for the progress bar."""

    def render(self, task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:.1f} runs/s" if speed else "– runs/s", style="progress.data.speed")


def _runtime_option(func):
    return click.option(
        "--runtime",
        default=DEFAULT_RUNTIME,
        envvar="LITMUS_RUNTIME",
        show_default=True,
        metavar="NAME",
        help=f"Where the real world runs ({', '.join(runtime_names())}).",
    )(func)


def _apply_limits(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> None:
    """``--limit NAME=N``: raise (or lower) one of the input limits for this command and its workers."""
    try:
        limits.apply_settings(dict(limits.parse_setting(value) for value in values))
        limits.check_settings()
    except InputError as exc:
        _fail(exc.line())
        sys.exit(EXIT_BAD_INPUT)


def _limit_option(func):
    return click.option(
        "--limit",
        "limit_settings",
        multiple=True,
        metavar="NAME=N",
        expose_value=False,
        callback=_apply_limits,
        help=f"Raise an input limit ({', '.join(limits.DEFAULTS)}); repeatable. See the docs' security model (Input limits).",
    )(func)


class _LazyGroup(_Group):
    """A group whose commands in other modules are imported only when they run (or ``--help`` lists them):
    ``revalidate`` need not import what ``fidelity`` and ``nearmiss`` do (hypothesis, their search code)."""

    lazy = {
        "fidelity": "litmus_replay.replay.fidelity.command:fidelity_command",
        "init-world": "litmus_replay.replay.world_skeleton:init_world_command",
        "nearmiss": "litmus_replay.replay.nearmiss.command:nearmiss_command",
        "serve": "litmus_replay.replay.serve:serve_command",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy and cmd_name not in self.commands:
            module, _, name = self.lazy[cmd_name].partition(":")
            self.add_command(getattr(importlib.import_module(module), name), cmd_name)
        return super().get_command(ctx, cmd_name)


_PROGRAM: list[bool] = []  # set by program(): this process is the litmus-replay command itself


def program() -> None:
    """The ``litmus-replay`` command: :func:`main` in a process of its own, which may therefore tune the
    process for its command (``revalidate`` freezes what it has loaded: :func:`batch.dedicate_process`).
    A program that calls :func:`main` itself keeps its process as it was."""
    _PROGRAM.append(True)
    main()


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="litmus-replay")
@verbosity_options(verbose="More detail (what each command adds is in its help).")
def main() -> None:
    """Replay recorded agent trajectories into a stub world and a real world, and score every tool call
    as a (proposal, commit) pair.

    -q and -v go before the command (litmus-replay -q run ...) or after it (litmus-replay run -q ...).
    NO_COLOR in the environment turns colour off."""
    click.get_current_context().call_on_close(_note_plugin_failures)
    clean_up_at_exit()  # this process owns its exit: containers go at exit and on SIGTERM too


def _note_plugin_failures() -> None:
    """One note as a command ends for the plug-ins that failed to load and no error has named: what names
    them fails with the reason, everything else works, and the user learns the install is broken (-q
    too: it is a warning, not detail)."""
    failures = unexplained_failures()
    if failures:
        affected = "it" if len(failures) == 1 else "them"
        said = "; ".join(failure.line() for failure in failures)
        click.echo(visible(f"litmus-replay: note: {said}; only what names {affected} is affected"), err=True)


def _open_runtime(runtime: str) -> Runtime:
    """The runtime, or exit 2 with its one-line reason; a runtime weaker here than its full mode says so once."""
    try:
        opened = get_runtime(runtime)
    except (UnknownRuntime, RuntimeUnavailable) as exc:
        _fail(f"--runtime: {exc}")
        sys.exit(EXIT_BAD_INPUT)
    if opened.notice:
        _note(opened.notice, warning=True)  # a runtime is never weaker silently
    return opened


def _replay(paths: tuple[str, ...], runtime: str, on_run=None) -> Batch:
    """Replay every scenario, printing each error line as it happens."""
    batch = Batch()
    with _open_runtime(runtime) as real_runtime:
        reported = 0
        for run in iter_scenario_runs(paths, real_runtime, batch):
            for error in batch.errors[reported:]:
                _fail(error)
            reported = len(batch.errors)
            if on_run is not None:
                on_run(run)
        for error in batch.errors[reported:]:
            _fail(error)
    return batch


@main.command(epilog=f"The table's cells: {CELL_LEGEND}")
@_limit_option
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--json", "json_path", type=click.Path(dir_okay=False), help="Write the whole result as JSON here.")
@click.option("--html", "html_dir", type=click.Path(file_okay=False), metavar="DIR",
              help="Write one HTML page per trajectory, and an index.html, into this directory.")
@click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="Write the run as one Markdown document here.")
@_runtime_option
@verbosity_options(quiet="Print only the summary line, what was written, and errors.",
                   verbose="Also say under each table why each call got its class, and what the cells mean.")
def run(paths: tuple[str, ...], json_path: str | None, html_dir: str | None, markdown_path: str | None,
        runtime: str) -> None:
    """Replay scenario files (or directories of them) and print each call's pair."""
    console = _console()
    level = verbosity()
    shown = []

    def show(run: Analysis) -> None:
        if level > QUIET:
            print_trajectory(console, run, evidence=level >= VERBOSE)
            shown.append(run)

    batch = _replay(paths, runtime, show)
    if shown and (level >= VERBOSE or console.is_terminal):
        console.print(Text(f"cells: {CELL_LEGEND}", style="dim"))
    print_run_summary(console, batch.runs, len(batch.errors))
    reports = [
        (json_path, lambda path: write_json(run_document(batch.runs, batch.errors), path)),
        (markdown_path, lambda path: write_atomic(path, markdown_report(batch.runs, batch.errors))),
        (html_dir, lambda path: write_html_dir(batch.runs, path, batch.errors)),
    ]
    for path, write in reports:
        if path:
            write_output(path, write, "the report")
    written = [path for path, _ in reports if path]
    if written:
        console.print(f"wrote {', '.join(written)}")
    if batch.errors:
        sys.exit(EXIT_BAD_INPUT)
    if batch.failed:
        sys.exit(EXIT_MISMATCH)


@main.command()
@_limit_option
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@_runtime_option
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON instead of lines: {trajectories: [{source, scenario, trajectory, label, revalidated, "
                   "finding, expectations (met, failed or null when the scenario sets none), problems}], "
                   "trajectories_checked, met, failed, input_errors: [line]}.")
@verbosity_options(quiet="Print only the failures and the tally.",
                   verbose="Also print each trajectory's judgements (the finding, the decisive call, the benchmark's check).")
def check(paths: tuple[str, ...], runtime: str, as_json: bool) -> None:
    """Validate scenarios and replay them against their expected classes; exit 1 on a mismatch."""
    level = verbosity()

    def show(run: Analysis) -> None:
        if as_json:
            return
        label = visible(f"{run.source}: {run.label}")
        revalidated = run.replay.revalidation.revalidated.value
        if run.problems:
            click.echo(f"{label}: FAILED — " + visible("; ".join(run.problems)))
        elif level == QUIET:
            return
        elif run.problems is None:
            click.echo(f"{label}: ok (no expectations) — {revalidated}")
        else:
            click.echo(f"{label}: ok — {revalidated}")
        lead = lead_text(run) if level >= VERBOSE else None
        if lead:
            click.echo(visible(f"  = {lead}"))

    batch = _replay(paths, runtime, show)
    checked, failed = len(batch.checked), len(batch.failed)
    if as_json:
        click.echo(json.dumps(_check_document(batch), indent=2, ensure_ascii=False))
    else:
        tally = [f"{plural(len(batch.runs), 'trajectory')} checked", f"{checked - failed}/{checked} met their expectations"]
        if batch.errors:
            tally.append(plural(len(batch.errors), "input error"))
        click.echo(" · ".join(tally))
    if batch.errors:
        sys.exit(EXIT_BAD_INPUT)
    if batch.failed:
        sys.exit(EXIT_MISMATCH)


def _check_document(batch: Batch) -> dict:
    """What ``check`` prints, as JSON (``check --json``)."""
    trajectories = []
    for run in batch.runs:
        revalidation = run.replay.revalidation
        trajectories.append({
            "source": str(run.source),
            "scenario": run.replay.scenario,
            "trajectory": run.replay.trajectory.id,
            "label": run.label,
            "revalidated": revalidation.revalidated.value,
            "finding": revalidation.finding,
            "expectations": None if run.problems is None else ("failed" if run.problems else "met"),
            "problems": list(run.problems or []),
        })
    return {"trajectories": trajectories, "trajectories_checked": len(batch.runs), "met": len(batch.checked) - len(batch.failed),
            "failed": len(batch.failed), "input_errors": list(batch.errors)}


GRAPH_FORMATS = {
    "json": lambda run: json.dumps(graph_document(run.graph), indent=2) + "\n",
    "dot": lambda run: to_dot(run.graph),
    "graphml": lambda run: to_graphml(run.graph),
    "html": trajectory_html,
}


@main.command()
@_limit_option
@click.argument("scenario", type=click.Path())
@click.option("--format", "fmt", default="json", show_default=True, metavar="|".join(GRAPH_FORMATS),
              help="What to write: the graph as JSON, Graphviz DOT or GraphML, or the trajectory's HTML page.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file instead of stdout.")
@_runtime_option
@click.option("--trajectory", "trajectory_id", metavar="ID", help="Which trajectory, when the scenario holds several.")
@verbosity_options(quiet="No note of which trajectory was drawn: the graph (or what was written) and errors only.")
def graph(scenario: str, fmt: str, output: str | None, runtime: str, trajectory_id: str | None) -> None:
    """Replay one scenario and write the causal graph of one of its trajectories."""
    if fmt not in GRAPH_FORMATS:
        _fail(f"--format: unknown format {fmt!r}; choose one of: {', '.join(GRAPH_FORMATS)}")
        sys.exit(EXIT_BAD_INPUT)
    batch = _replay((scenario,), runtime)
    if batch.errors:
        sys.exit(EXIT_BAD_INPUT)
    runs = batch.runs
    if trajectory_id is not None:
        runs = [run for run in runs if trajectory_id in (run.replay.trajectory.id, run.label)]
        if not runs:
            valid = ", ".join(run.replay.trajectory.id for run in batch.runs) or "none"
            _fail(f"{scenario}: --trajectory: no trajectory {trajectory_id!r}; choose one of: {valid}")
            sys.exit(EXIT_BAD_INPUT)
    if not runs:
        _fail(f"{scenario}: no trajectory to draw")
        sys.exit(EXIT_BAD_INPUT)
    chosen = runs[0]
    if len(runs) > 1 and verbosity() > QUIET:
        click.echo(visible(f"litmus-replay: {scenario} holds {len(runs)} trajectories; drawing {chosen.label} "
                           f"(choose with --trajectory: {', '.join(run.replay.trajectory.id for run in runs)})"), err=True)
    text = GRAPH_FORMATS[fmt](chosen)
    if output:
        write_output(output, lambda path: write_atomic(path, text), "the graph")
        click.echo(f"wrote {output} ({fmt}: {chosen.label}, {plural(len(chosen.replay.calls), 'call')})", err=True)
    else:
        click.echo(text, nl=False)


def _verdict_labels(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """``--label LABEL=MEANING`` options as a mapping (the meanings are checked by the batch)."""
    labels = {}
    for value in values:
        label, sep, meaning = value.partition("=")
        if not sep or not label.strip() or not meaning.strip():
            raise click.BadParameter(f"{value!r}: expected LABEL=MEANING, e.g. fail=tool_misuse", param=param)
        labels[label.strip()] = meaning.strip()
    return labels


def _check_benchmark_options(benchmark_version: str | None) -> None:
    """Exit 2 with one line, before anything is written, on what the installed bridges refuse: a
    ``--benchmark-version`` none of them knows, or a bridge's bad environment setting (which would
    otherwise cost every one of its runs its world)."""
    from .bridges import options_problem

    problem = options_problem(benchmark_version)
    if problem:
        _fail(problem)
        sys.exit(EXIT_BAD_INPUT)


@main.command("revalidate", epilog=f"The pages' call tables (--reports): {CELL_LEGEND}")
@_limit_option
@click.argument("runs", nargs=-1, required=True, type=click.Path())
@click.option("--worlds", "worlds_dir", type=click.Path(),
              help="Directory of world files, by task key (a benchmark with a bridge, such as AgentDojo, needs none).")
@click.option("--format", "fmt", default="auto", show_default=True,
              help="Trajectory format of the runs: auto (each file's own, recognised from its content) or an adapter's "
                   "name (inspect, tau-bench, openai-chat, ...; a name no adapter has lists them all).")
@click.option("--task", "task_key", metavar="KEY",
              help="Task key of the runs whose files name none (Anthropic messages, MCP, OpenTelemetry spans, a "
                   "request body without metadata): their world is the one --worlds names KEY.")
@_runtime_option
@click.option("--jobs", default=lambda: os.cpu_count() or 1, show_default="one per CPU", type=click.IntRange(1),
              help="Worker processes.")
@click.option("--executor", type=click.Choice(["local", "dask"]), default="local", show_default=True,
              help="Where runs replay: a local process pool of --jobs workers, or a Dask cluster (--scheduler).")
@click.option("--scheduler", metavar="ADDRESS", help="Dask scheduler address, with --executor dask.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="Where results go.")
@click.option("--reports", "reports", type=click.Choice(["all", "flagged", "none"]), default="flagged", show_default=True,
              help="Which runs get an HTML page: those in which two judgements disagree (over- or under-penalised, "
                   "a check that disagrees with the effects, drift, unscoreable), every run, or none. "
                   "`litmus-replay report` makes any later.")
@click.option("--no-reports", is_flag=True, help="The same as --reports none.")
@click.option("--benchmark-version", "benchmark_version", metavar="VERSION", envvar="LITMUS_BENCHMARK_VERSION",
              help="Replay every AgentDojo run with this benchmark version (v1.2.1), even one that records its own "
                   "(default: the run's own, else the earliest from v1.1 on that has every task the run names).")
@click.option("--original-kind", "original_kind", metavar="KIND",
              help="What the recorded verdicts judged where a run's file does not say it: proposal_time (a harness "
                   "scored the proposed calls; over- and under-penalised findings apply) or state_based (a check "
                   "of the environment after the run).")
@click.option("--label", "labels", metavar="LABEL=MEANING", multiple=True, callback=_verdict_labels,
              help="What one of the benchmark's own verdict labels means for safety, tool_misuse or safe "
                   "(--label fail=tool_misuse --label pass=safe; a graded score is pass or fail): a label that "
                   "says nothing of safety (pass, C) is never flagged until it is given a meaning. Repeatable.")
@verbosity_options(quiet="No progress bar: the table, its findings, errors and warnings only.",
                   verbose="Also list every flagged run (its finding and why) under the table.")
def revalidate_command(runs: tuple[str, ...], worlds_dir: str | None, fmt: str, task_key: str | None, runtime: str,
                       jobs: int, executor: str, scheduler: str | None, out_dir: str, reports: str,
                       no_reports: bool, benchmark_version: str | None, original_kind: str | None,
                       labels: dict[str, str]) -> None:
    """Re-validate historical runs against their tasks' worlds: the original verdict beside the
    re-validated class. Appends to OUT/results.jsonl as it goes; re-running resumes.

    Exit status: 0 when every run was re-validated, 2 on bad input, 3 when some run had no world or hit a
    harness error (re-running retries those)."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from . import batch

    console = _console()
    level = verbosity()
    bar = Progress(TextColumn("revalidating"), BarColumn(), MofNCompleteColumn(), _RateColumn(),
                   TimeRemainingColumn(), console=Console(stderr=True), transient=False, disable=level == QUIET)
    task = bar.add_task("runs", total=None)
    input_errors: list[batch.ResultLine] = []
    missing_worlds: list[batch.ResultLine] = []  # the first run without a world, to say what it tried

    def start(total: int, done: int) -> None:
        bar.update(task, total=total, completed=done)
        if done and level > QUIET:
            bar.console.print(f"resuming {out_dir}: {done} of {plural(total, 'run')} already done there, "
                              f"{total - done} new to replay", soft_wrap=True)

    def advance(line: batch.ResultLine) -> None:
        bar.advance(task)
        if line.status == "input_error":
            input_errors.append(line)
        elif line.status == "missing_world" and not missing_worlds:
            missing_worlds.append(line)

    hooks = batch.Progress(start=start, advance=advance, total=lambda total: bar.update(task, total=total))
    missing = batch.missing_inputs(runs)
    if missing:  # before the runtime, the bar or anything in --out
        _fail(f"{missing[0]}: no such file or directory")
        sys.exit(EXIT_BAD_INPUT)
    if runtime not in runtime_names():  # one that cannot run here says so from the batch, before --out
        _fail(f"--runtime: {unknown_runtime(runtime)}")
        sys.exit(EXIT_BAD_INPUT)
    benchmark_version = benchmark_version.strip() if benchmark_version else None
    _check_benchmark_options(benchmark_version)

    def notice(text: str) -> None:  # what the runtime isolates less than it can: said with -q too
        bar.console.print(f"litmus-replay: note: {text}", soft_wrap=True, markup=False, highlight=False)

    hooks.notice = notice
    hooks.begin = bar.start  # not before: bad input is one line, with no bar above it
    if _PROGRAM:  # this process exists for the batch: the collector leaves what is loaded alone
        batch.dedicate_process()
    try:
        try:
            summary = batch.run_batch(runs, worlds_dir, out_dir, fmt=fmt, runtime=runtime, jobs=jobs, executor=executor,
                                       scheduler=scheduler, reports="none" if no_reports else reports,
                                       progress=hooks, task=task_key, benchmark_version=benchmark_version,
                                       original_kind=original_kind, verdict_labels=labels)
        finally:
            if bar.live.is_started:
                bar.stop()
    except InputError as exc:
        _fail(exc.line())
        sys.exit(EXIT_BAD_INPUT)
    except UnknownName as exc:
        _fail(f"--format: {exc}")
        sys.exit(EXIT_BAD_INPUT)
    except (UnknownRuntime, RuntimeUnavailable) as exc:  # said before anything is written to --out
        _fail(f"--runtime: {exc}")
        sys.exit(EXIT_BAD_INPUT)
    except OSError as exc:  # an output path that cannot be written, a scheduler that does not answer
        _fail(f"{getattr(exc, 'filename', None) or out_dir}: {os_reason(exc)}")
        sys.exit(EXIT_BAD_INPUT)
    print_revalidation(console, summary)
    flagged = []  # with -v: every flagged run of the batch (an earlier, resumed run's too), in the batch's order
    if level >= VERBOSE:
        flagged = [line for line in batch.iter_results(Path(out_dir) / "results.jsonl") if line.finding in FLAGGED]
    if flagged:
        console.print(Text(f"flagged runs ({len(flagged)}):"))
        for line in flagged:
            console.print(Text(visible(f"  {line.run}: {line.finding}" + (f" — {line.detail}" if line.detail else "")
                                       + (f" (page: {Path(out_dir) / line.report})" if line.report else ""))))
    for line in input_errors:
        error = line.error or "unreadable"
        _fail(error if error.startswith(line.file) else f"{line.file}: {error}")
    if summary["input_error"]:
        sys.exit(EXIT_BAD_INPUT)
    if summary["missing_world"] or summary["harness_error"]:
        _fail(f"{len(summary['missing_world']) + len(summary['harness_error'])} of {plural(summary['runs'], 'run')} could not be "
              f"re-validated (missing world or harness error); see {Path(out_dir) / 'results.jsonl'}, and re-run to retry them")
        for line in missing_worlds:
            worlds = worlds_dir or "WORLDS"
            _note(f"run {line.run}: {line.error}; a worlds file to start from: "
                  f"litmus-replay init-world {line.file} -o {Path(worlds) / 'NEW.yaml'}")
        sys.exit(EXIT_NOT_REVALIDATED)


@main.command("report")
@click.argument("run_id")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="The output directory of a `revalidate` batch (holding its results.jsonl).")
@click.option("--worlds", "worlds_dir", type=click.Path(), help="Worlds directory (default: the batch's).")
@click.option("--runtime", metavar="NAME", default=None,
              help=f"Where the real world runs ({', '.join(runtime_names())}; default: the batch's).")
def report_command(run_id: str, out_dir: str, worlds_dir: str | None, runtime: str | None) -> None:
    """Make one run's HTML page from a batch's results.jsonl, as the batch would have written it: the run
    is read from its file again and replayed against its task's world (with the benchmark version the
    batch was given). Prints the page's path."""
    from . import batch

    _check_benchmark_options(None)
    if runtime is not None and runtime not in runtime_names():
        _fail(f"--runtime: {unknown_runtime(runtime)}")
        sys.exit(EXIT_BAD_INPUT)
    try:
        path = batch.write_run_page(out_dir, run_id, worlds_dir=worlds_dir, runtime=runtime)
    except (UnknownRuntime, RuntimeUnavailable) as exc:
        _fail(f"--runtime: {exc}")
        sys.exit(EXIT_BAD_INPUT)
    except InputError as exc:
        _fail(exc.line())
        sys.exit(EXIT_BAD_INPUT)
    except OSError as exc:
        _fail(f"{getattr(exc, 'filename', None) or out_dir}: {os_reason(exc)}")
        sys.exit(EXIT_BAD_INPUT)
    click.echo(str(path))


@main.command()
@click.option("--n", "count", default=1200, show_default=True, type=click.IntRange(1), help="Runs to write.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--format", "fmt", default="inspect", show_default=True, help="native, openai-chat or inspect.")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False), help="A new or empty directory.")
@verbosity_options(verbose="Also list the planted over- and under-penalised runs.")
def corpus(count: int, seed: int, fmt: str, out_dir: str) -> None:
    """Write a corpus of runs in a foreign format, with their worlds and the planted ground truth
    (manifest.json): in the proportions of the seed study, 37 over- and 9 under-penalised per 1,200."""
    from .corpus import write_corpus

    try:
        manifest = write_corpus(count, seed, fmt, out_dir)
    except InputError as exc:
        _fail(exc.line())
        sys.exit(EXIT_BAD_INPUT)
    except UnknownName as exc:
        _fail(f"--format: {exc}")
        sys.exit(EXIT_BAD_INPUT)
    except OSError as exc:
        _fail(f"{getattr(exc, 'filename', None) or out_dir}: {os_reason(exc)}")
        sys.exit(EXIT_BAD_INPUT)
    click.echo(
        f"wrote {count} runs ({fmt}) to {out_dir}: {len(manifest.over_penalised)} over-penalised, "
        f"{len(manifest.under_penalised)} under-penalised planted; worlds in {out_dir}/worlds, truth in manifest.json"
    )
    if verbosity() >= VERBOSE:
        for finding, planted in (("over_penalised", manifest.over_penalised), ("under_penalised", manifest.under_penalised)):
            for run_id in planted:
                click.echo(f"  {finding}: {run_id}")


@main.command()
@click.argument("what", type=click.Choice(["trajectory", "report", "results-line", "summary"]), default="trajectory")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write to this file instead of stdout.")
def schema(what: str, output: str | None) -> None:
    """Print a JSON Schema: of the native trajectory format (one JSONL line, the default), of a run's JSON
    report, of one line of a batch's results.jsonl, or of its summary.json."""
    if what == "trajectory":
        text = json.dumps(json_schema(), indent=2, sort_keys=True) + "\n"
    elif what == "report":
        from .report.schema import report_schema_text

        text = report_schema_text()
    else:
        from .batch.schema import schema_text

        text = schema_text(what)
    if output:
        write_output(output, lambda path: write_atomic(path, text), "the schema")
    else:
        click.echo(text, nl=False)


@main.command()
@click.argument("domains", nargs=-1)
@click.option("--json", "as_json", is_flag=True,
              help="Print JSON: {domain: {tool: [{name, required, default}] or null when the tool takes any "
                   "arguments}}.")
@verbosity_options(quiet="No note on the domains that cannot run here.")
def tools(domains: tuple[str, ...], as_json: bool) -> None:
    """List every domain tool with its arguments (optional ones with their default), to write bindings.

    A domain that cannot run here (a bridge whose benchmark's package is not installed) is listed as
    unavailable, its tools without their arguments, and a note says what it needs."""
    from .tools import all_tools, domain_unavailable, tool_arguments

    found = all_tools()
    unknown = sorted(set(domains) - set(found))
    if unknown:
        from litmus_replay.envs.domain import unknown_domain

        _fail(unknown_domain(unknown[0]).failure or f"unknown domain {unknown[0]!r}; choose one of: {', '.join(sorted(found))}")
        sys.exit(EXIT_BAD_INPUT)
    chosen = {name: found[name] for name in sorted(domains or found)}
    listing = {
        domain: {tool: tool_arguments(method) for tool, method in sorted(methods.items())}
        for domain, methods in chosen.items()
    }
    unavailable = {domain: why for domain in chosen if (why := domain_unavailable(domain))}
    if as_json:
        document = {
            domain: {tool: None if args is None else [{"name": a.name, "required": a.required, "default": a.default}
                                                      for a in args]
                     for tool, args in entries.items()}
            for domain, entries in listing.items()
        }
        click.echo(json.dumps(document, indent=2, default=str))
    else:
        for domain, entries in listing.items():
            click.echo(f"{domain}:" + (" (unavailable here)" if domain in unavailable else ""))
            for tool, args in entries.items():
                shown = "**any" if args is None else ", ".join(str(arg) for arg in args)
                click.echo(f"  {tool}({shown})")
    by_reason: dict[str, list[str]] = {}
    for domain, why in unavailable.items():
        by_reason.setdefault(why, []).append(domain)
    for why, names in by_reason.items():
        _note(f"{', '.join(names)}: unavailable here, so their tools are listed without their arguments: {why}")


@main.group()
def image() -> None:
    """The container image the docker runtime runs worlds in."""


@image.command("build")
@click.option("--offline", is_flag=True,
              help="No image registry: debootstrap python3 from apt's configured mirror, then docker import.")
@click.option("--tag", metavar="T", help="Image tag (default: litmus-replay-env:<version>-<hash of the envs code>).")
def image_build(offline: bool, tag: str | None) -> None:
    """Build the env image (progress on stderr, the tag on stdout)."""
    from litmus_replay.envs.runtimes.docker.image import build

    try:
        click.echo(build(tag=tag, offline=offline))
    except RuntimeUnavailable as exc:
        _fail(str(exc))
        sys.exit(1)


if __name__ == "__main__":  # pragma: no cover
    main()
