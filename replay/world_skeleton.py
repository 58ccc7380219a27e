"""A worlds file to start from, written from recorded runs (``litmus-replay init-world RUN…``).

Re-validating your own logs needs a world per task: the domains the runs' tools reach, bindings from the
names your benchmark gave its tools to the domains' own, and a policy. This module reads the runs and
writes all it can tell: every tool they call with its argument names and how often, bound to the domain
tool it most plausibly is (by the words of its name and its arguments' names) or listed as unknown; the
principals; the task keys the runs name, as the file's ``name`` and ``tasks``; a ``files`` tree holding the
files the runs read, list, move or delete (so their calls meet what the recording met); and suggested
rules, commented out. The user completes it: what counts as misuse is theirs to say, so no rule is on.
"""

from __future__ import annotations

import posixpath
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import click
import yaml

from .model import Trajectory
from .tools import all_tools, tool_arguments
from .worlds import key_levels, provider_names

__all__ = ["ToolGuess", "guess_tool", "init_world_command", "world_skeleton"]

# Words that name the same action or thing in tool names, each group under the word the domains use.
_VERBS = {
    "read": {"read", "get", "cat", "open", "view", "show", "fetch", "load", "head", "tail"},
    "write": {"write", "save", "create", "put", "append", "store", "touch"},
    "delete": {"delete", "remove", "rm", "unlink", "erase", "drop", "purge", "destroy", "wipe"},
    "list": {"list", "ls", "dir", "listdir", "browse", "tree", "glob"},
    "move": {"move", "mv", "rename", "relocate"},
    "link": {"link", "symlink", "ln"},
    "run": {"run", "exec", "execute", "bash", "shell", "sh", "cmd", "command", "terminal", "subprocess"},
    "query": {"query", "search", "find", "lookup", "filter", "select", "records"},
    "update": {"update", "modify", "set", "change", "patch", "edit", "amend"},
    "transfer": {"transfer", "send", "pay", "wire", "payment"},
    "confirm": {"confirm", "approve", "authorize", "authorise"},
    "close": {"close", "resolve", "finish"},
}
_NOUNS = {
    "file": {"file", "files", "path", "document", "doc", "content", "contents"},
    "dir": {"dir", "directory", "folder", "path"},
    "record": {"record", "records", "row", "rows", "entry", "entries", "item", "items", "db", "database"},
    "funds": {"funds", "money", "payment", "balance", "amount", "account"},
    "profile": {"profile", "user", "account", "settings"},
    "ticket": {"ticket", "tickets", "issue", "issues"},
    "command": {"command", "cmd", "bash", "shell", "script"},
}
# A recorded argument's name -> the domain argument names it plausibly is.
_ARGUMENTS = {
    "path": {"path", "file", "filename", "file_name", "filepath", "file_path", "dir", "directory", "folder", "name"},
    "content": {"content", "contents", "text", "body", "data"},
    "command": {"command", "cmd", "script", "shell_command"},
    "to": {"to", "recipient", "destination", "dest", "payee", "to_account"},
    "from": {"from", "sender", "source_account", "from_account"},
    "amount": {"amount", "sum", "money", "value"},
    "filter": {"filter", "query", "where", "condition", "search"},
    "src": {"src", "source", "from_path", "old_path", "old_name"},
    "dst": {"dst", "destination", "to_path", "new_path", "new_name"},
    "target": {"target", "points_to"},
    "link_path": {"link", "link_path", "link_name", "linkname"},
    "id": {"id", "record_id", "ticket_id", "row_id", "identifier"},
    "fields": {"fields", "updates", "changes", "values"},
    "user": {"user", "username", "user_id", "account"},
    "account": {"account", "account_id", "iban"},
}
# Calls of the built-in files domain that expect their path to exist (the argument that names it).
_EXISTING_PATH = {"read_file": "path", "delete_path": "path", "move_path": "src", "list_dir": "path"}
_DEFAULT_WORKSPACE = "/workspace"


def _words(name: str) -> set[str]:
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return {word for word in re.split(r"[^a-z0-9]+", spaced.lower()) if word}


def _groups(words: set[str], table: dict[str, set[str]]) -> set[str]:
    return {group for group, members in table.items() if words & members}


@dataclass
class ToolGuess:
    """A recorded tool and the domain tool it most plausibly is (``to`` is None where none is)."""

    tool: str
    calls: int
    arguments: list[str]
    domain: str | None = None
    to: str | None = None
    args: dict[str, str] = field(default_factory=dict)  # recorded argument -> the domain's
    unmapped: list[str] = field(default_factory=list)  # recorded arguments the domain tool has no name for


def _argument_map(recorded: list[str], domain_args: list[str]) -> tuple[dict[str, str], list[str]]:
    mapping: dict[str, str] = {}
    free = [name for name in domain_args if name not in recorded]
    unmapped = []
    for name in recorded:
        if name in domain_args:
            continue
        match = next((target for target in free if name.lower() in _ARGUMENTS.get(target, {target})), None)
        if match is None:
            unmapped.append(name)
        else:
            mapping[name] = match
            free.remove(match)
    return mapping, unmapped


def guess_tool(tool: str, arguments: list[str], calls: int, domains: dict[str, dict[str, list[str]]]) -> ToolGuess:
    """The domain tool a recorded tool most plausibly is: one whose name shares its action (``remove`` is
    ``delete``), then the most shared things (``file`` is ``path``) and arguments; none without an action
    in common, and none where two domain tools tie."""
    guess = ToolGuess(tool, calls, arguments)
    for domain, tools in domains.items():
        if tool in tools:  # already a domain tool's own name: no binding
            guess.domain, guess.to = domain, tool
            return guess
    words = _words(tool)
    verbs, nouns = _groups(words, _VERBS), _groups(words, _NOUNS)
    scored = []
    for domain, tools in domains.items():
        for name, domain_args in tools.items():
            their = _words(name)
            if not verbs & _groups(their, _VERBS):
                continue
            mapping, unmapped = _argument_map(arguments, domain_args)
            score = 3 + len(nouns & _groups(their | set(domain_args), _NOUNS)) + len(arguments) - len(unmapped)
            scored.append((score, domain, name, mapping, unmapped))
    scored.sort(key=lambda item: -item[0])
    if scored and (len(scored) == 1 or scored[0][0] > scored[1][0]):
        _, guess.domain, guess.to, guess.args, guess.unmapped = scored[0]
    return guess


def _domain_tools() -> dict[str, dict[str, list[str]]]:
    """The registered domains a user's world may name: not a bridge's (named after its world provider, as
    ``<benchmark>-<suite>``, whose worlds the provider builds from a benchmark's task), and
    only those whose section may start empty."""
    from .scenario import validate_world

    bridges = tuple(provider_names())
    found = {}
    for domain, tools in all_tools().items():
        if domain in bridges or domain.startswith(tuple(f"{name}-" for name in bridges)):
            continue
        try:
            validate_world({"principals": ["agent"], domain: {}}, "(skeleton)")
        except Exception:  # noqa: BLE001 - a domain that cannot start empty is no place to bind to
            continue
        found[domain] = {name: [arg.name for arg in tool_arguments(method) or []] for name, method in tools.items()}
    return found


def _task_keys(trajectories: list[Trajectory]) -> tuple[str, list[str]]:
    """The file's ``name`` (the most specific key level every run's task shares) and further ``tasks``."""
    keys = sorted({run.task for run in trajectories if run.task})
    if not keys:
        return "my-task", []
    shared = set(key_levels(keys[0]))
    for key in keys[1:]:
        shared &= set(key_levels(key))
    if shared:
        return max(shared, key=lambda level: level.count("/")), []
    return keys[0], keys[1:]


def _files_tree(trajectories: list[Trajectory], guesses: dict[str, ToolGuess]) -> dict[str, Any]:
    """The files the runs' calls expect to exist, under the workspace, as a ``files`` tree."""
    tree: dict[str, Any] = {}
    for run in trajectories:
        for _, call in run.calls():
            guess = guesses[call.tool]
            argument = _EXISTING_PATH.get(guess.to or "") if guess.domain == "files" else None
            if argument is None:
                continue
            recorded = next((name for name, to in guess.args.items() if to == argument), argument)
            value = call.arguments.get(recorded)
            if not isinstance(value, str) or not value or "\0" in value or ".." in value.split("/"):
                continue
            path = posixpath.normpath(posixpath.join(_DEFAULT_WORKSPACE, value))
            if not path.startswith(_DEFAULT_WORKSPACE + "/"):
                continue  # outside the workspace: what the run reached there is the user's to declare
            if guess.to == "list_dir":
                tree.setdefault(path + "/", None)
            elif guess.to == "read_file" and call.result is not None and isinstance(call.result.output, str) \
                    and call.result.status == "ok":
                tree[path] = call.result.output  # what the run read there
            else:
                tree.setdefault(path, "")
    return dict(sorted(tree.items()))


def world_skeleton(trajectories: Iterable[Trajectory], sources: list[str]) -> str:
    """A worlds file (YAML, with comments saying what to complete) for the runs given."""
    runs = [run for run in trajectories]
    domains = _domain_tools()
    called: Counter[str] = Counter()
    arguments: dict[str, dict[str, None]] = {}
    for run in runs:
        for _, call in run.calls():
            called[call.tool] += 1
            arguments.setdefault(call.tool, {}).update(dict.fromkeys(call.arguments))
    guesses = {tool: guess_tool(tool, list(arguments[tool]), count, domains) for tool, count in called.most_common()}
    used = sorted({guess.domain for guess in guesses.values() if guess.domain})
    name, tasks = _task_keys(runs)
    world: dict[str, Any] = {"principals": sorted({run.principal for run in runs}) or ["agent"]}
    for domain in used:
        world[domain] = {}
    if "files" in world:
        tree = _files_tree(runs, guesses)
        world["files"] = {"workspace": _DEFAULT_WORKSPACE, **({"tree": tree} if tree else {})}
    bindings = [_binding(guess) for guess in guesses.values() if guess.to and guess.to != guess.tool]
    document: dict[str, Any] = {"name": name, **({"tasks": tasks} if tasks else {}), "world": world,
                                "policy": {"rules": []}, "bindings": bindings}
    return _with_comments(document, guesses, sources, len(runs))


def _binding(guess: ToolGuess) -> dict[str, Any]:
    return {"tool": guess.tool, "to": guess.to, **({"args": guess.args} if guess.args else {})}


def _dump(value: Any) -> str:
    return yaml.safe_dump(value, sort_keys=False, allow_unicode=True, width=120, default_flow_style=False)


def _with_comments(document: dict[str, Any], guesses: dict[str, ToolGuess], sources: list[str], count: int) -> str:
    head = [
        f"# A world for {count} run{'s' if count != 1 else ''} of {', '.join(sources)}, written by litmus-replay",
        "# init-world: complete it, then `litmus-replay revalidate RUNS --worlds THIS_DIRECTORY --out OUT`.",
        "# The files tree holds the files the runs read (with what they read), list, move or delete; the other",
        "# domains' sections start empty: give them the state the runs met (see the docs' Worlds page).",
    ]
    body = _dump({key: value for key, value in document.items() if key != "bindings"})
    rules = _suggested_rules(guesses)
    body = body.replace("policy:\n  rules: []\n", "policy:\n  # What counts as misuse is yours to say: no rule is on. For example (one line each):\n"
                        + "".join(f"  #   rules: [{rule}]\n" for rule in rules) + "  rules: []\n")
    lines = [*head, body.rstrip("\n"), "bindings:" + ("" if document["bindings"] else " []")]
    for guess in guesses.values():
        said = f"{guess.tool} ({guess.calls} call{'s' if guess.calls != 1 else ''}; arguments: {', '.join(guess.arguments) or 'none'})"
        if guess.to is None:
            lines.append(f"  # unknown: {said}: no domain tool looks like it; its calls replay as unknown_tool")
        elif guess.to == guess.tool:
            lines.append(f"  # {said} is the {guess.domain} domain's own tool")
        else:
            lines.append(f"  # {said} -> the {guess.domain} domain's {guess.to}"
                         + (f"; no argument of it for {', '.join(guess.unmapped)}" if guess.unmapped else ""))
            lines.extend("  " + line for line in _dump([_binding(guess)]).splitlines())
    return "\n".join(lines) + "\n"


def _suggested_rules(guesses: dict[str, ToolGuess]) -> list[str]:
    """A rule per bound tool that changes state, critical: a call of it is what the run is judged by."""
    changing = [guess.to for guess in guesses.values()
                if guess.to and _groups(_words(guess.to), _VERBS) & {"write", "delete", "move", "link", "run", "update",
                                                                    "transfer", "close"}]
    return [f"{{id: no-{to.replace('_', '-')}, when: \"tool == '{to}'\", critical: true}}"
            for to in dict.fromkeys(changing)]


@click.command("init-world")
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False))
@click.option("--format", "fmt", default="auto", show_default=True, help="Trajectory format of the runs.")
@click.option("--task", "task_key", metavar="KEY", help="The task key of runs whose files name none (as revalidate's).")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the worlds file here (a new file) "
              "instead of to stdout.")
def init_world_command(runs: tuple[str, ...], fmt: str, task_key: str | None, output: str | None) -> None:
    """Write a worlds file to start from for these runs: every tool they call, bound to the domain tool it
    most plausibly is (or listed as unknown), their principals and task keys, the files they read, and
    suggested rules (commented out). Complete it, then re-validate the runs with --worlds."""
    from .batch.discovery import read_runs
    from .errors import InputError, TrajectoryError, UnknownName

    trajectories: list[Trajectory] = []
    try:
        for run in runs:
            try:
                trajectories.extend(read_runs(Path(run), fmt, task_key.strip() if task_key else None))
            except UnknownName as exc:
                raise TrajectoryError(run, "format", str(exc)) from None
        text = world_skeleton(trajectories, [Path(run).name for run in runs])
        if output is None:
            click.echo(text, nl=False)
            return
        try:
            Path(output).parent.mkdir(parents=True, exist_ok=True)
            with open(output, "x", encoding="utf-8") as handle:
                handle.write(text)
        except FileExistsError:
            raise InputError(output, None, "already exists: init-world writes a new file, never over one") from None
        except OSError as exc:
            raise InputError(output, None, f"cannot write it: {exc.strerror or exc}") from None
    except InputError as exc:
        click.echo(f"litmus-replay: error: {exc.line()}", err=True)
        sys.exit(2)
    click.echo(f"wrote {output}: complete it, then `litmus-replay revalidate {' '.join(runs)} --worlds "
               f"{Path(output).parent} --out OUT`", err=True)
