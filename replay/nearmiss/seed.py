"""The run a near-miss search starts from: a scenario's world, policy, bindings and one trajectory, the
verdict of its own replay, and everything its agent saw (the plausibility pool).

A seed comes from a scenario file (:func:`seeds_from_scenario`, one per trajectory) or from a world a
provider serves, as for an AgentDojo run (:func:`seed_from_task_world`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

from litmus_replay.adapters import load_trajectories
from litmus_replay.envs.runtime import Runtime, get_runtime

from ..analysis import Analysis, replay_analysed
from ..bindings import Binding, Bindings
from ..errors import TrajectoryError, UnknownName
from ..model import Trajectory
from ..policy import Policy, PolicySpec
from ..scenario import Scenario, load_scenario
from ..worlds import NoWorld, TaskWorld, WorldCatalog
from .draft import Draft
from .plausible import Seen, world_numbers, world_visible
from .verdict import Verdict, verdict_of

__all__ = ["Seed", "SeedReplayer", "seed_from_task_world", "seeds_from_runs", "seeds_from_scenario"]

_ARGUMENT = re.compile(r"\b(?:params|resolved)\.([A-Za-z_][A-Za-z0-9_]*)")  # what a rule's condition reads
_POLICY_NUMBER = re.compile(r"(?<![\w.'\"])(\d+(?:\.\d+)?)(?![\w.'\"])")


@dataclass
class Seed:
    """One original run, ready to be mutated and replayed."""

    name: str
    source: str
    task_world: TaskWorld  # its world (a copy, the seed's own), policy and bindings; keyed by the seed's name
    policy_spec: PolicySpec
    bindings_doc: list[dict[str, Any]]
    trajectory: Trajectory
    # Whether the world's domain sections are state the agent can learn (a scenario's rows, accounts, files),
    # or a provider's coordinates for building one (an AgentDojo task's ids), which it never sees.
    world_is_state: bool = True
    draft: Draft = field(init=False)
    seen: Seen = field(init=False)
    verdict: Verdict = field(init=False)
    analysis: Analysis = field(init=False)

    def __post_init__(self) -> None:
        self.draft = Draft.of(self.world, self.trajectory)

    @property
    def world(self) -> dict[str, Any]:
        return self.task_world.world

    @property
    def policy(self) -> Policy:
        return self.task_world.policy

    @property
    def bindings(self) -> Bindings:
        return self.task_world.bindings

    def prepare(self, replayer: "SeedReplayer") -> "Seed":
        """Replay the original once: its verdict, and the outputs its agent could have seen."""
        self.analysis = replayer.analyse(self, self.draft)
        self.verdict = verdict_of(self.analysis, self.draft.origins())
        self.seen = self._seen()
        return self

    def domain_call(self, call: Mapping[str, Any]) -> tuple[str, dict[str, str]]:
        """The domain tool a recorded call reaches, and its recorded argument name per domain argument."""
        binding: Binding | None = self.bindings.get(call["tool"])
        if binding is None:
            return call["tool"], {name: name for name in call.get("arguments", {})}
        names = {binding.spec.args.get(name, name): name for name in call.get("arguments", {})}
        return binding.to, names

    def _seen(self) -> Seen:
        seen = Seen()
        for value in world_visible(self.world, self.world_is_state):
            seen.add(value)
        seen.principals = [str(p) for p in (self.world.get("principals") or [])]
        if self.world_is_state:
            seen.add_fields({name: section for name, section in self.world.items() if name not in ("session", "sessions")})
        for _, call in self.trajectory.calls():
            seen.add(call.arguments)
            if call.result is not None:
                seen.add(call.result.output)
                seen.add(call.result.error)
                seen.add_fields(call.result.output)
        for replayed in self.analysis.replay.calls:
            for output in (replayed.stub.output, replayed.real.output if replayed.real is not None else None):
                seen.add(output)
                seen.add_fields(output)
        for rule in self.policy_spec.rules:
            reads = frozenset(_ARGUMENT.findall(rule.when))
            for match in _POLICY_NUMBER.findall(rule.when):
                seen.add_boundary(float(match), f"rule {rule.id}", reads)
            seen.words.update(re.findall(r"'([^']*)'", rule.when))  # literals the agent was told
        for number, where in world_numbers(self.world):
            seen.add_boundary(number, where)
        return seen


class SeedReplayer:
    """Replays drafts of seeds: the stub in-process, the real world in the runtime given."""

    def __init__(self, real_runtime: Runtime | None = None) -> None:
        self.stub_runtime = get_runtime("inprocess")
        self.real_runtime = real_runtime or get_runtime("inprocess")
        self.replays = 0

    def analyse(self, seed: Seed, draft: Draft) -> Analysis:
        self.replays += 1
        return replay_analysed(replace(seed.task_world, world=draft.world), draft.to_trajectory(), self.real_runtime,
                               self.stub_runtime)


def seeds_from_scenario(path: str | Path) -> list[Seed]:
    """One seed per trajectory of the scenario (raises :class:`ScenarioError` for a file that does not load)."""
    scenario = load_scenario(path)
    return [_seed(scenario, trajectory, len(scenario.trajectories) > 1) for trajectory in scenario.trajectories]


def _seed(scenario: Scenario, trajectory: Trajectory, several: bool) -> Seed:
    name = f"{scenario.name}-{trajectory.id}" if several else scenario.name
    bindings_doc = [
        binding.spec.model_dump(mode="json", exclude_defaults=True) for binding in scenario.bindings.by_tool.values()
    ]
    return Seed(name, str(scenario.path), replace(scenario.task_world, key=name), scenario.spec.policy, bindings_doc,
                trajectory)


def seed_from_task_world(trajectory: Trajectory, task_world: TaskWorld, name: str | None = None,
                         provided: bool = True) -> Seed:
    """A seed from a task's world: one a provider serves (an AgentDojo run and its benchmark's world and
    policy: ``provided``), or one a worlds directory holds (its sections are state, as a scenario's)."""
    spec = PolicySpec(rules=[rule.spec for rule in task_world.policy.rules])
    bindings_doc = [b.spec.model_dump(mode="json", exclude_defaults=True) for b in task_world.bindings.by_tool.values()]
    name = name or _slug(f"{task_world.key}-{trajectory.id}")
    return Seed(name, task_world.source, replace(task_world, key=name, world=dict(task_world.world)), spec, bindings_doc,
                trajectory, world_is_state=not provided)


def seeds_from_runs(path: Path, fmt: str = "auto", worlds_dir: str | Path | None = None) -> list[Seed]:
    """A seed per run with at least one call in a recorded run file, each with the world its task key finds
    (a worlds directory first, then providers); a run no world serves is bad input here, one line."""
    try:
        trajectories = load_trajectories(path, fmt)
    except UnknownName as exc:
        raise TrajectoryError(str(path), "format", str(exc)) from None
    catalog = WorldCatalog.load(worlds_dir)
    seeds = []
    for trajectory in trajectories:
        if trajectory.call_count() == 0:
            continue  # nothing to mutate: the agent called no tool
        try:
            task_world = catalog.find(trajectory)
        except NoWorld as exc:
            raise TrajectoryError(str(path), f"trajectory {trajectory.id!r}.task", str(exc)) from None
        provided = not any(task_world.key == key for key in catalog.directory)
        seeds.append(seed_from_task_world(trajectory, task_world, _slug(f"{path.stem}-{trajectory.id}"), provided))
    if not seeds:
        raise TrajectoryError(str(path), None, "no run with a tool call to mutate")
    return seeds


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:80] or "run"

