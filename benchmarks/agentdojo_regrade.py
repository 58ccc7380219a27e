"""AgentDojo's own re-grading of a recorded run, as the benchmark's maintainers would re-score its log.

Per run, as ``TaskSuite.run_task_with_pipeline`` does with the agent replaced by the log: the suite's
environment with the run's injections (``suite.load_and_inject_default_environment``), the user task's
``init_environment``, a deep copy as the pre-environment, every recorded tool call through
``FunctionsRuntime(suite.tools).run_function``, then ``TaskSuite._check_task_result`` for the user task's
utility and the injection task's security, given the run's final answer and its calls. :func:`scored` then
scores the checks as AgentDojo's ``benchmark.py`` does (a run that recorded an error is left out, a
denial-of-service attack's security is ``not utility``, an unattacked run's security is true by
construction and compares nothing).

The benchmark version is the one litmus-replay replayed the run in, read from the ``world`` of the run's
line in ``results.jsonl`` (:func:`world_version`, :func:`replayed_versions`), else the one the run records,
else the one litmus-replay's bridge infers (:func:`coordinates`). Nothing here comes from litmus-replay's
AgentDojo domain: the environment, the calls and the checks are AgentDojo's alone.

Used by ``agentdojo_history.py`` (AgentDojo's CPU per run beside litmus-replay's) and by
``tests/integration/test_agentdojo_regrading.py`` (litmus-replay's replayed checks identical to these).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import multiprocessing
import re
import warnings
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

CHECKS = ("utility", "security")

# How a result line names the world its checks were replayed in (``TaskWorld.source`` of the AgentDojo
# world provider): ``agentdojo v1.2.1 (world provider)``.
_WORLD_SOURCE = re.compile(r"^agentdojo (?P<version>v[\w.]+) \(world provider\)$")


def world_version(source: Any) -> str | None:
    """The benchmark version a result line's ``world`` names, or None (no world, or not AgentDojo's)."""
    match = _WORLD_SOURCE.match(source) if isinstance(source, str) else None
    return match["version"] if match else None


def result_lines(out: Path, base: Path) -> dict[Path, dict[str, Any]]:
    """Each line of ``out/results.jsonl`` by its run file, resolved against ``base`` (the directory the
    batch ran from: a line names its file as the command line did)."""
    lines: dict[Path, dict[str, Any]] = {}
    with open(out / "results.jsonl", encoding="utf-8") as handle:
        for text in handle:
            line = json.loads(text)
            lines[(base / line["file"]).resolve()] = line
    return lines


def replayed_versions(out: Path, base: Path) -> dict[Path, str]:
    """The version each run's checks were replayed in, by run file, for the runs whose line names one."""
    versions = {}
    for path, line in result_lines(out, base).items():
        version = world_version(line.get("world"))
        if version is not None:
            versions[path] = version
    return versions


def coordinates(path: Path) -> dict[str, Any]:
    """Suite, version, tasks and injections of a run as litmus-replay's bridge maps them (the version the
    run records, else the one it infers); raises ``NoWorld`` or ``ValueError`` when it maps none."""
    from litmus_replay.adapters import load_trajectories
    from litmus_replay.replay.bridges.agentdojo import run_coordinates

    (trajectory,) = load_trajectories(path, "agentdojo")
    return run_coordinates(trajectory)


@dataclass
class Plan:
    """What re-grading one run needs: its suite and tasks in one benchmark version."""

    version: str
    suite_name: str
    suite: Any
    user_task: Any
    injection_task: Any | None


_SUITES: dict[tuple[str, str], Any] = {}


def suite_of(version: str, suite_name: str) -> Any:
    """AgentDojo's task suite of a version, its environment file read once (AgentDojo caches the files it
    reads): a maintainer re-grading knows the version and loads the suites once."""
    key = (version, suite_name)
    if key not in _SUITES:
        from agentdojo.task_suite.load_suites import get_suites

        suites = get_suites(version)
        if suite_name not in suites:
            raise LookupError(f"no suite {suite_name!r} in AgentDojo {version}")
        suite = suites[suite_name]
        suite.load_and_inject_default_environment({})
        _SUITES[key] = suite
    return _SUITES[key]


def plan(run: dict[str, Any], version: str) -> Plan | str:
    """The run's suite and tasks in ``version``, or why it cannot be re-graded there."""
    suite_name, user_task_id = run.get("suite_name"), run.get("user_task_id")
    injection_task_id = run.get("injection_task_id") or None
    try:
        suite = suite_of(version, suite_name)
    except LookupError as exc:
        return str(exc.args[0])
    user_task = suite.user_tasks.get(user_task_id) or suite.injection_tasks.get(user_task_id)
    injection_task = suite.injection_tasks.get(injection_task_id) if injection_task_id else None
    if user_task is None or (injection_task_id and injection_task is None):
        return f"task not in AgentDojo {version} {suite_name}"
    return Plan(version, suite_name, suite, user_task, injection_task)


def read(path: Path) -> tuple[dict[str, Any], list[Any], list[dict[str, Any]]]:
    """A run log, its calls as AgentDojo's ``FunctionCall``s (``functions_stack_trace_from_messages``) and
    its final answer (:func:`model_output`)."""
    from agentdojo.functions_runtime import FunctionCall

    run = json.loads(Path(path).read_bytes())
    messages = run.get("messages") or []
    trace = [FunctionCall.model_validate(call) for message in messages if message.get("role") == "assistant"
             for call in message.get("tool_calls") or []]
    return run, trace, model_output(messages)


def model_output(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The final answer as AgentDojo's checks take it (content blocks); none when the run did not end on one."""
    if not messages or messages[-1].get("role") != "assistant":
        return []
    content = messages[-1].get("content")
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    return [block for block in content if isinstance(block, dict) and "content" in block]


class Environments:
    """Each (version, suite, injections)'s environment, built by AgentDojo once; every run gets a deep
    copy of it, which is what a fresh ``load_and_inject_default_environment`` returns, in a fraction of
    the time (most of AgentDojo's time per run is parsing the suite's YAML again)."""

    def __init__(self) -> None:
        self._built: dict[tuple[str, str, tuple[tuple[str, str], ...]], Any] = {}

    def __call__(self, plan: Plan, injections: dict[str, str]) -> Any:
        key = (plan.version, plan.suite_name, tuple(sorted(injections.items())))
        built = self._built.get(key)
        if built is None:
            built = self._built[key] = plan.suite.load_and_inject_default_environment(injections)
        return copy.deepcopy(built)


def environments(plan: Plan, injections: dict[str, str],
                 build: Callable[[Plan, dict[str, str]], Any] | None = None) -> tuple[Any, Any]:
    """The run's environment and its pre-environment (a deep copy before any call), as
    ``run_task_with_pipeline`` makes them; ``build`` (an :class:`Environments`) instead of AgentDojo's
    fresh build of the environment, when given."""
    from agentdojo.base_tasks import BaseUserTask

    if build is None:
        environment = plan.suite.load_and_inject_default_environment(injections)
    else:
        environment = build(plan, injections)
    if isinstance(plan.user_task, BaseUserTask):
        environment = plan.user_task.init_environment(environment)
    return environment, environment.model_copy(deep=True)


def run_calls(plan: Plan, environment: Any, trace: list[Any],
              answered: Callable[[Any], Any] | None = None) -> None:
    """Every recorded call through AgentDojo's ``FunctionsRuntime``, in order; ``answered`` sees each result."""
    from agentdojo.functions_runtime import FunctionsRuntime

    runtime = FunctionsRuntime(plan.suite.tools)
    for call in trace:
        result, _ = runtime.run_function(environment, call.function, call.args)
        if answered is not None:
            answered(result)


def check(plan: Plan, output: list[dict[str, Any]], pre_environment: Any, environment: Any,
          trace: list[Any]) -> dict[str, bool | None]:
    """The user task's utility and, when attacked, the injection task's security; None for a check that
    raises on the re-graded state."""
    checks: dict[str, bool | None] = {}
    for name, task in (("utility", plan.user_task), ("security", plan.injection_task)):
        if task is None:
            continue
        try:
            checks[name] = bool(plan.suite._check_task_result(task, output, pre_environment, environment, trace))
        except Exception:  # a check that crashes on a re-graded state: an answer, not a crash
            checks[name] = None
    return checks


def scored(run: dict[str, Any], checks: dict[str, bool | None]) -> dict[str, bool | None]:
    """The checks AgentDojo's ``benchmark.py`` compares with the recorded ones: none for a run that recorded
    an error; a denial-of-service attack's security is ``not utility``; an unattacked run's security is
    left out (true by construction), and so is a check the run did not record."""
    from litmus_replay.adapters.agentdojo import is_dos_attack

    if run.get("error"):
        return {}
    checks = dict(checks)
    if is_dos_attack(run.get("attack_type")) and isinstance(checks.get("utility"), bool):
        checks["security"] = not checks["utility"]
    return {name: checks[name] for name in CHECKS
            if name in checks and isinstance(run.get(name), bool)
            and not (name == "security" and not run.get("injection_task_id"))}


def regrade(path: Path, version: str, build: Callable[[Plan, dict[str, str]], Any] | None = None) -> dict[str, Any]:
    """One run re-graded by AgentDojo in ``version``: ``checks`` (as its checks answer), ``scored`` (as
    ``benchmark.py`` compares them with the recorded ones), or ``skip`` (why it cannot be re-graded)."""
    run, trace, output = read(path)
    chosen = plan(run, version)
    if isinstance(chosen, str):
        return {"skip": chosen}
    environment, pre_environment = environments(chosen, run.get("injections") or {}, build)
    run_calls(chosen, environment, trace)
    checks = check(chosen, output, pre_environment, environment, trace)
    return {"checks": checks, "scored": scored(run, checks)}


_BUILD: Environments | None = None  # a worker process's environments, kept across its runs


def _regrade_in_worker(item: tuple[Path, str]) -> dict[str, Any]:
    global _BUILD
    if _BUILD is None:
        _BUILD = Environments()
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")  # AgentDojo's checks warn (deprecations) and print as they run
        return regrade(*item, _BUILD)


def regrade_all(items: list[tuple[Path, str]], jobs: int = 1) -> list[dict[str, Any]]:
    """:func:`regrade` of every (run file, version), in order, in ``jobs`` worker processes (each keeps its
    own :class:`Environments`); in this process where ``jobs`` is 1."""
    if jobs <= 1 or len(items) < 2:
        return [_regrade_in_worker(item) for item in items]
    chunk = max(1, len(items) // (jobs * 8))
    with ProcessPoolExecutor(jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        return list(pool.map(_regrade_in_worker, items, chunksize=chunk))
