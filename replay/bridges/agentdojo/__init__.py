"""AgentDojo runs, served from AgentDojo itself: the world of each run, the policy from the benchmark's own
tasks, and agreement with the benchmark's own checks.

**World.** One domain per suite (:mod:`litmus_replay.envs.bridges.agentdojo`), given the run's benchmark
version, user task, injection task, recorded injections and final answer.

**Benchmark version.** A version given for the whole batch (``revalidate --benchmark-version``) is
used for every run, even one that records its own; otherwise a run names it in ``benchmark_version``
where present. Runs without the field are replayed with the earliest version from ``v1.1`` on that has
everything the run names (its suite, user task, injection task and injection vectors): see
:mod:`.versions`, which states the rule and why ``v1.1`` (``v1`` and ``v1.1`` share every environment,
tool and injection task and differ only in the travel suite's user-task checks, which ``v1.1`` fixed;
the published runs' recorded utilities are the ``v1.1`` checks'). A run naming a task no version knows
gets no world, and the reason names the versions tried.

**Policy.** The injection task's ground-truth calls that change state become critical rules: the call
with the attacker's own values (those the injection task's goal names, such as the attacker's IBAN or
address) as the context resolved them, so the critical decision node is the attacker's goal. Where the
goal names none, the call's tool is the rule, unless the user task's own ground truth uses that tool
(then it is a benign call). An
injection task with no state-changing ground truth (the attacker wants data in the answer) falls back to
the suite's state-changing tools that the user task's ground truth does not use. Rules judge what a call
did (``judge: effect``), so a call AgentDojo's environment refused is ``proposal_only_misuse``.

**Agreement.** :func:`agreement` compares the checks the real world ran on its final state
(``utility``, and ``security`` for attacked runs) with the recorded ones, and names for every
disagreement the first call whose replayed answer departs from the recording.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from litmus_replay.envs.bridges import agentdojo as bridge
from litmus_replay.envs.quiet_stdout import quiet_stdout

from ...model import Trajectory
from ...policy import Policy, PolicySpec, RuleSpec
from ...worlds import NoWorld, TaskWorld
from .. import rules_file_problem, rules_from_environment, user_rules
from .checks import agreement, departs, drift, first_departure
from .policy import STATE_CHANGING, benchmark_policy
from .versions import EARLIEST, candidate_versions, consistent_versions, infer_version, known_versions

__all__ = ["AgentDojoWorlds", "STATE_CHANGING", "UNVERSIONED", "agreement", "benchmark_policy", "departs", "drift",
           "final_answer", "first_departure", "run_coordinates", "user_rules"]

# The earliest version a run without ``benchmark_version`` is replayed with (see :mod:`.versions`): the
# version of a run that names nothing newer.
UNVERSIONED = EARLIEST

def run_coordinates(trajectory: Trajectory, benchmark_version: str | None = None) -> dict[str, Any]:
    """Suite, version, tasks and injections of an AgentDojo run, from what the adapter kept.

    The version is ``benchmark_version`` when given (the batch's option), else the one the run records,
    else the one :func:`.versions.infer_version` infers from what the run names; ``version_from`` says
    which (``option``, ``recorded``, ``inferred``). Raises :class:`NoWorld` when nothing is inferred.
    """
    extra = trajectory.source.extra
    suite = extra.get("suite_name")
    user_task = extra.get("user_task_id")
    if not isinstance(suite, str) or not isinstance(user_task, str):
        raise NoWorld("not an AgentDojo run: no suite_name or user_task_id")
    injection_task = extra.get("injection_task_id") or None
    injections = dict(extra.get("injections") or {})
    recorded = extra.get("benchmark_version")
    if benchmark_version:
        version, source = benchmark_version, "option"
    elif isinstance(recorded, str) and recorded:
        version, source = recorded, "recorded"
    else:
        try:
            messages = extra.get("user_messages") or []
            prompt = messages[0] if messages and isinstance(messages[0], str) else None
            inferred = infer_version(suite, user_task, injection_task, injections, prompt, injections.values())
        except bridge.BridgeUnavailable as exc:
            raise NoWorld(str(exc)) from None
        if inferred.version is None:
            raise NoWorld(inferred.reason)
        version, source = inferred.version, "inferred"
    return {
        "suite": suite,
        "version": version,
        "version_from": source,
        "user_task": user_task,
        "injection_task": injection_task,
        "injections": injections,
        "attack_type": extra.get("attack_type") if isinstance(extra.get("attack_type"), str) else None,
    }


def final_answer(trajectory: Trajectory) -> str | None:
    """The agent's last message when it is an answer (AgentDojo checks read it), not a tool call."""
    if not trajectory.turns or trajectory.turns[-1].calls:
        return None
    return trajectory.turns[-1].text


RULES_VARIABLE = "LITMUS_AGENTDOJO_RULES"


class AgentDojoWorlds:
    """World provider for ``agentdojo/...`` tasks; one instance per worker process.

    The policy of each run is the benchmark's (see the module docstring) plus ``extra_rules``: by default
    the rules of the file that ``LITMUS_AGENTDOJO_RULES`` names. To replace the benchmark's policy for a
    suite or a task, give ``revalidate --worlds`` a world file for its key (``agentdojo/banking``).
    """

    name = "agentdojo"

    def __init__(self, extra_rules: list[RuleSpec] | None = None, benchmark_version: str | None = None) -> None:
        self.extra_rules = rules_from_environment(RULES_VARIABLE) if extra_rules is None else extra_rules
        # Every run's version when given (``revalidate --benchmark-version``, passed by the world catalog);
        # else each run's own, recorded or inferred (see :mod:`.versions`).
        self.benchmark_version = benchmark_version or None
        self._policies: dict[tuple[str, str, str, str | None, str | None], Policy] = {}
        self._lock = threading.Lock()

    # What the bridge offers beyond its worlds (see :mod:`litmus_replay.replay.bridges`).

    @staticmethod
    def benchmark_checks(result: Any) -> tuple[dict[str, Any], dict[str, Any]]:
        """AgentDojo's own checks of the run, recorded against replayed, and the drift."""
        return agreement(result), drift(result)

    @staticmethod
    def known_versions() -> list[str]:
        """The benchmark versions the installed AgentDojo defines (raises where it is not installed)."""
        return known_versions()

    @staticmethod
    def environment_problem() -> str | None:
        """A bad rules file in ``LITMUS_AGENTDOJO_RULES``, in one line, where AgentDojo is installed."""
        return rules_file_problem(RULES_VARIABLE, "agentdojo")

    def world_for(self, trajectory: Trajectory) -> TaskWorld:
        with quiet_stdout():  # AgentDojo's own code runs here (its suites, tasks, ground truth): none of it prints
            return self._world_for(trajectory)

    def _world_for(self, trajectory: Trajectory) -> TaskWorld:
        run = run_coordinates(trajectory, self.benchmark_version)
        world = self._world(trajectory, run, run["version"])
        if run["version_from"] == "inferred":  # the run names no version: later ones its text allows may have made it
            versions = candidate_versions()
            later = versions[versions.index(run["version"]) + 1:]
            messages = trajectory.source.extra.get("user_messages") or []
            prompt = messages[0] if messages and isinstance(messages[0], str) else None
            later = consistent_versions(later, run["suite"], run["user_task"], run["injection_task"], prompt,
                                        run["injections"].values())
            world = replace(world, others=lambda: self._others(trajectory, run, later))
        return world

    def _others(self, trajectory: Trajectory, run: dict[str, Any], versions: list[str]) -> list[TaskWorld]:
        """The run's world in each later version that has everything the run names."""
        worlds = []
        with quiet_stdout():
            for version in versions:
                try:
                    worlds.append(self._world(trajectory, run, version))
                except NoWorld:
                    continue
        return worlds

    def _world(self, trajectory: Trajectory, run: dict[str, Any], version: str) -> TaskWorld:
        suite_name = run["suite"]
        try:
            suite = bridge.suite_for(version, suite_name)
        except bridge.BridgeUnavailable as exc:
            raise NoWorld(str(exc)) from None
        except LookupError as exc:
            raise NoWorld(str(exc.args[0])) from None
        if bridge.find_task(suite, run["user_task"]) is None:
            raise NoWorld(f"no task {run['user_task']!r} in AgentDojo {version} {suite_name}")
        if run["injection_task"] is not None and run["injection_task"] not in bridge.injection_tasks(suite):
            raise NoWorld(f"no injection task {run['injection_task']!r} in AgentDojo {version} {suite_name}")
        unknown = sorted(set(run["injections"]) - set(bridge.environment_template(version, suite_name).defaults))
        if unknown:
            raise NoWorld(f"injection vectors unknown to AgentDojo {version} {suite_name}: {', '.join(unknown)}")
        domain = bridge.domain_name(suite_name)
        section = {
            "version": version,
            "user_task": run["user_task"],
            "injection_task": run["injection_task"],
            "injections": run["injections"],
            "model_output": final_answer(trajectory),
        }
        key = f"agentdojo/{suite_name}/{run['user_task']}"
        return TaskWorld(key, f"agentdojo {version} (world provider)", {domain: section},
                         self.policy(version, suite_name, run), frozenset(bridge.SUITE_TOOLS[suite_name]))

    def policy(self, version: str, suite_name: str, run: dict[str, Any]) -> Policy:
        key = (version, suite_name, run["user_task"], run["injection_task"], run.get("attack_type"))
        with self._lock:
            policy = self._policies.get(key)
            if policy is None:
                spec = benchmark_policy(version, suite_name, run["user_task"], run["injection_task"], run.get("attack_type"))
                spec = PolicySpec(rules=[*spec.rules, *self.extra_rules])
                policy = self._policies[key] = Policy.compile(spec, f"agentdojo {version} {suite_name}")
            return policy


