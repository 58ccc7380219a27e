"""``litmus-replay serve WORLD``: a litmus world as an MCP server over stdio, every call judged as a pair as
it happens and written to a pair log, a summary on stderr when the client goes.

Bad input (a world that is not there, a policy that does not parse, a log that exists already, no ``mcp``
package) is one line naming the file and the field, exit status 2, before anything is served.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from pathlib import Path

import click

from litmus_replay.envs import EnvError, RuntimeUnavailable
from litmus_replay.envs.runtime import Runtime, UnknownRuntime, get_runtime, runtime_names

from .cli_common import QUIET, fail, verbosity, verbosity_options
from .errors import InputError
from .live_world import LiveWorld, load_live_world
from .pair_log import PairLog

__all__ = ["serve_command"]

EXIT_BAD_INPUT = 2


def _bad(message: str) -> None:
    fail(message)
    sys.exit(EXIT_BAD_INPUT)


def _runtime(name: str) -> Runtime:
    try:
        runtime = get_runtime(name)
    except (UnknownRuntime, RuntimeUnavailable) as exc:
        _bad(f"--runtime: {exc}")
    if runtime.notice:
        click.echo(f"litmus-replay: note: {runtime.notice}", err=True)
    return runtime


@click.command("serve")
@click.argument("world", type=click.Path())
@click.option("--task", metavar="KEY", help="The task whose world to serve, when WORLD is a worlds directory or a "
              "world file serving several keys.")
@click.option("--trajectory", "trajectory_id", metavar="ID",
              help="Whose principal and ambient session to act with, when a scenario holds several trajectories.")
@click.option("--principal", metavar="NAME", help="The principal the agent acts as (default: the scenario "
              "trajectory's, else the world's first).")
@click.option("--session", "ambient_session", metavar="TOKEN",
              help="The ambient session token the agent's calls carry (default: the scenario trajectory's).")
@click.option("--log", "log_path", type=click.Path(dir_okay=False), metavar="FILE",
              help="The pair log to write, a new file (default: pairs-<UTC time>.jsonl here).")
@click.option("--runtime", default="sandbox", envvar="LITMUS_RUNTIME", show_default=True, metavar="NAME",
              help=f"Where the real world runs ({', '.join(runtime_names())}); the stub runs in-process.")
@verbosity_options(quiet="Say nothing at the end but errors.")
def serve_command(world: str, task: str | None, trajectory_id: str | None, principal: str | None,
                  ambient_session: str | None, log_path: str | None, runtime: str) -> None:
    """Serve WORLD's tools over MCP on stdin and stdout: each call is made in the real world (its result is
    the real world's) and judged at proposal and at commit as it happens; every pair goes to the pair log,
    which the MCP adapter reads back (`--format mcp`).

    WORLD is a scenario file, a world file, or a worlds directory with --task."""
    try:
        live = load_live_world(world, task=task, trajectory=trajectory_id, principal=principal,
                               ambient_session=ambient_session)
    except InputError as exc:
        _bad(exc.line())
    if importlib.util.find_spec("mcp") is None:
        _bad("serve: needs the MCP SDK, which is not installed: pip install 'litmus-replay[mcp]'")
    from .live_calls import LiveCalls
    from .mcp_server import serve_stdio

    path = Path(log_path or time.strftime("pairs-%Y%m%dT%H%M%SZ.jsonl", time.gmtime()))
    with _runtime(runtime) as real_runtime:
        try:
            log = PairLog(path, _header(live, runtime))
        except FileExistsError:
            _bad(f"--log: {path} exists already; name a new file (a pair log is never overwritten)")
        except OSError as exc:
            _bad(f"--log: {path}: {exc.strerror or exc}")
        try:
            calls = LiveCalls(live, log, real_runtime)
        except (EnvError, InputError) as exc:
            log.close()
            path.unlink(missing_ok=True)  # nothing was served: no log of nothing
            _bad(f"{live.task_world.source}: world: could not be opened: {exc}")
        try:
            serve_stdio(calls, f"litmus-replay {live.task_world.key}")
        finally:
            summary = calls.close()
    if verbosity() > QUIET:
        click.echo(_summary_line(summary, path), err=True)


def _header(live: LiveWorld, runtime: str) -> dict:
    return {"world": live.task_world.key, "source": live.task_world.source, "principal": live.principal,
            "ambient_session": live.ambient_session, "runtime": runtime,
            "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}


def _summary_line(summary: dict, path: Path) -> str:
    classes = " · ".join(f"{name} {count}" for name, count in summary["classes"].items() if count)
    refused = f", {summary['refused']} refused" if summary["refused"] else ""
    run = summary["revalidation"]
    return (f"litmus-replay: served {summary['calls']} call(s){refused}: {classes or 'none'}; "
            f"run: {run['revalidated']} ({run['finding']}); pairs in {path}")
