"""What every ``litmus-replay`` command shares, wherever it is defined: ``-q``/``-v``, the console its
tables are drawn on, and the one-line failure for an output path that cannot be written."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable

import click
from rich.console import Console

from .report.visible import visible

__all__ = ["EXIT_BAD_INPUT", "QUIET", "VERBOSE", "fail", "has_verbosity", "os_reason", "output_console", "verbosity",
           "verbosity_options", "verbosity_params", "write_output"]

EXIT_BAD_INPUT = 2
QUIET, NORMAL, VERBOSE = -1, 0, 1
_KEY = "litmus_replay.verbosity"  # in the invocation's shared ``Context.meta``


def fail(message: str) -> None:
    """One line on stderr; the message often quotes recorded text, so its control characters show as escapes."""
    click.echo(f"litmus-replay: error: {visible(message)}", err=True)


def _set_verbosity(level: int, other: str) -> Callable[[click.Context, click.Parameter, bool], None]:
    def callback(ctx: click.Context, param: click.Parameter, given: bool) -> None:
        if not given:
            return
        if ctx.get_parameter_source(other) is click.core.ParameterSource.COMMANDLINE:
            raise click.BadParameter("give -q or -v, not both", ctx=ctx, param=param)
        ctx.meta[_KEY] = level  # a command's own flag, parsed after the group's, wins
    return callback


QUIET_HELP = ("Only the essential result (the last line: a tally, or what was written), errors and warnings (a broken "
              "plug-in, a runtime isolating less than it can): no progress, no other notes.")
VERBOSE_HELP = "More detail, where the command has any."


def verbosity_params(quiet: str = QUIET_HELP, verbose: str = VERBOSE_HELP) -> list[click.Option]:
    """``-q/--quiet`` and ``-v/--verbose``, with what they do for one command; read with :func:`verbosity`."""
    return [click.Option(["-q", "--quiet"], is_flag=True, expose_value=False, help=quiet,
                         callback=_set_verbosity(QUIET, "verbose")),
            click.Option(["-v", "--verbose"], is_flag=True, expose_value=False, help=verbose,
                         callback=_set_verbosity(VERBOSE, "quiet"))]


def verbosity_options(quiet: str = QUIET_HELP, verbose: str = VERBOSE_HELP) -> Callable[[Callable], Callable]:
    """A decorator giving a command (or the group: ``litmus-replay -q CMD``) ``-q`` and ``-v``; a command of
    the group that declares neither is given them by the group (see ``cli._Group``)."""
    def decorate(func: Callable) -> Callable:
        params = getattr(func, "__click_params__", None)
        if params is None:
            params = func.__click_params__ = []  # type: ignore[attr-defined]
        params.extend(reversed(verbosity_params(quiet, verbose)))  # click reverses decorator order
        return func
    return decorate


def has_verbosity(command: click.Command) -> bool:
    return any(param.name in ("quiet", "verbose") for param in command.params)


def verbosity(ctx: click.Context | None = None) -> int:
    """``QUIET`` (-1), 0 or ``VERBOSE`` (1), as the command line asked; 0 outside a command."""
    ctx = ctx or click.get_current_context(silent=True)
    return ctx.meta.get(_KEY, NORMAL) if ctx is not None else NORMAL


def output_console() -> Console:
    """The console a command's tables and lines go to: as wide as the terminal; writing to a pipe or a log,
    wide enough for the tables and never wrapping a line (a finding stays one line for grep and CI logs).
    Colour follows rich's rules, so ``NO_COLOR`` turns it off."""
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=160, soft_wrap=True)
    return console


def os_reason(exc: OSError) -> str:
    """Why a write failed, in words: a path under a file says which file (mkdir says only "File exists")."""
    if isinstance(exc, (FileExistsError, NotADirectoryError)) and exc.filename:
        for parent in (Path(exc.filename), *Path(exc.filename).parents):
            if parent.exists() and not parent.is_dir():
                return f"{parent} is a file, not a directory"
    return exc.strerror or str(exc)


def write_output(path: str, write: Callable[[str], object], what: str) -> None:
    """``write(path)``, or exit 2 with one line naming the path when it cannot be written there."""
    try:
        write(path)
    except OSError as exc:
        fail(f"{path}: cannot write {what}: {os_reason(exc)}")
        sys.exit(EXIT_BAD_INPUT)
