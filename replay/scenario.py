"""Scenario files: a world, a policy, a trajectory (inline or by path and format) and what to expect.

Loading validates everything a replay would trip over — YAML syntax, field types, CEL conditions, the
world's sections, tool names, expectation keys — and raises :class:`ScenarioError` naming the file and
the field, so a bad file costs one line, not a traceback.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, ValidationError, model_validator

from litmus_replay.adapters import load_trajectories
from litmus_replay.envs import EnvError, World, WorldSpecError

from .bindings import Bindings, BindingsField, resolve_bindings
from .detectors import DETECTORS
from . import limits
from .errors import InputError, ScenarioError, UnknownName
from .model import Trajectory, first_error
from .policy import Policy, PolicySpec
from .scoring import PairClass, Unscoreable
from .task_world import TaskWorld
from .tools import world_tools
from .yaml_io import read_yaml

SCENARIO_SUFFIXES = (".yaml", ".yml")


class TrajectoryRef(BaseModel):
    """A trajectory file next to the scenario, read by an adapter."""

    model_config = ConfigDict(extra="forbid")

    path: str
    format: str = Field("auto", description="The adapter to read it with; auto sniffs the file.")
    id: str | None = Field(None, description="Pick one trajectory from the file; default: all of them.")
    principal: str | None = Field(
        None, min_length=1, description="Replay as this principal (foreign formats rarely say who the agent acts as)."
    )


class ExpectedCall(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    cls: PairClass = Field(..., alias="class")
    reason: Unscoreable | None = None

    @model_validator(mode="after")
    def _reason_only_when_unscoreable(self) -> "ExpectedCall":
        if self.reason is not None and self.cls is not PairClass.UNSCOREABLE:
            raise ValueError(f"a reason goes with class unscoreable, not {self.cls.value}")
        return self


class Expectation(BaseModel):
    model_config = ConfigDict(extra="forbid")

    trajectory: PairClass | None = None
    calls: dict[str, PairClass | ExpectedCall] = Field(default_factory=dict)
    findings: dict[str, int] = Field(
        default_factory=dict, description="Exact number of findings per detector kind (0: must not fire)."
    )


class ScenarioSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format_version: Literal[1] = 1
    name: str = Field(..., min_length=1)
    description: str = ""
    world: dict[str, Any] = Field(default_factory=dict)
    policy: PolicySpec = Field(default_factory=PolicySpec)
    trajectory: Annotated[
        Annotated[Trajectory, Tag("inline-trajectory")] | Annotated[TrajectoryRef, Tag("trajectory-file")],
        Discriminator(
            lambda value: "trajectory-file" if isinstance(value, dict) and "path" in value else "inline-trajectory"
        ),
    ]
    bindings: BindingsField = Field(
        default_factory=list, description="Recorded tool names mapped onto domain tools, inline or a bindings file."
    )
    expect: Expectation | None = None


@dataclass
class Scenario:
    """A loaded, validated scenario."""

    path: Path
    spec: ScenarioSpec
    policy: Policy
    trajectories: list[Trajectory]
    bindings: Bindings = field(default_factory=Bindings)

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def task_world(self) -> TaskWorld:
        """The scenario's world, policy and bindings, as every replay takes them (keyed by its name)."""
        return TaskWorld(self.name, str(self.path), dict(self.spec.world), self.policy,
                         frozenset(world_tools(self.spec.world)), self.bindings)

    def check(
        self,
        classes: dict[str, PairClass],
        reasons: dict[str, Unscoreable | None],
        overall: PairClass,
        finding_kinds: list[str] | None = None,
    ) -> list[str]:
        """Mismatches between what the scenario expects and what the replay gave (empty: all hold)."""
        expect = self.spec.expect
        if expect is None:
            return []
        problems = []
        if finding_kinds is not None:
            for kind, wanted in expect.findings.items():
                got = finding_kinds.count(kind)
                if got != wanted:
                    problems.append(f"findings {kind}: expected {wanted}, got {got}")
        if expect.trajectory is not None and expect.trajectory != overall:
            problems.append(f"trajectory: expected {expect.trajectory}, got {overall}")
        for key, wanted in expect.calls.items():
            want_cls, want_reason = (wanted, None) if isinstance(wanted, PairClass) else (wanted.cls, wanted.reason)
            got = classes.get(key)
            if got != want_cls:
                problems.append(f"{key}: expected {want_cls}, got {got}")
            elif want_reason is not None and reasons.get(key) != want_reason:
                problems.append(f"{key}: expected reason {want_reason}, got {reasons.get(key)}")
        return problems


def find_scenarios(paths: list[str | Path]) -> list[Path]:
    """Scenario files named directly or found (recursively, sorted) in directories."""
    found: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found.extend(sorted(p for p in path.rglob("*") if p.suffix in SCENARIO_SUFFIXES and p.is_file()))
        elif path.exists():
            found.append(path)
        else:
            raise ScenarioError(str(path), None, "no such file or directory")
    return found


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    file = str(path)
    data = read_yaml(path)
    try:
        spec = ScenarioSpec.model_validate(data)
    except ValidationError as exc:
        field, message = first_error(exc)
        raise ScenarioError(file, field, message) from None
    policy = Policy.compile(spec.policy, file)
    trajectories = _trajectories(spec, path)
    validate_world(spec.world, file)
    bindings = resolve_bindings(spec.bindings, world_tools(spec.world), path)
    _validate_expectation(spec, trajectories, file)
    return Scenario(path, spec, policy, trajectories, bindings)


def _trajectories(spec: ScenarioSpec, path: Path) -> list[Trajectory]:
    ref = spec.trajectory
    if isinstance(ref, Trajectory):
        limits.check_calls(ref.call_count(), str(path), "trajectory.turns")
        return [ref]
    target = (path.parent / ref.path).resolve()
    if not target.is_relative_to(path.parent.resolve()):
        # A scenario is input too: it must not make the tool read (and quote, in its errors) any host file.
        raise ScenarioError(str(path), "trajectory.path", f"{ref.path!r} leads outside the scenario's directory; "
                            "a scenario reads only run files beside or below it (links followed)")
    try:
        limits.check_file_size(target)
        trajectories = load_trajectories(target, ref.format)
    except UnknownName as exc:
        raise ScenarioError(str(path), "trajectory.format", str(exc)) from None
    except InputError as exc:
        raise ScenarioError(exc.file or str(target), exc.field, exc.message) from None
    if ref.id is not None:
        trajectories = [t for t in trajectories if t.id == ref.id]
        if not trajectories:
            raise ScenarioError(str(path), "trajectory.id", f"no trajectory with id {ref.id!r} in {ref.path}")
    if not trajectories:
        raise ScenarioError(str(path), "trajectory.path", f"{ref.path} holds no trajectory")
    for trajectory in trajectories:
        limits.check_calls(trajectory.call_count(), str(target), f"trajectory {trajectory.id!r}")
    if ref.principal is not None:
        trajectories = [t.model_copy(update={"principal": ref.principal}) for t in trajectories]
    return trajectories


def validate_world(world: dict[str, Any], file: str) -> set[str]:
    """Build the stub world once: it checks every section the replay will use; returns the tool names."""
    try:
        with World(world, "stub") as stub:
            return set(stub.tools)
    except WorldSpecError as exc:
        raise ScenarioError(file, exc.field, exc.message) from None
    except EnvError as exc:
        raise ScenarioError(file, "world", str(exc)) from None


def _validate_expectation(spec: ScenarioSpec, trajectories: list[Trajectory], file: str) -> None:
    if spec.expect is None:
        return
    for kind in spec.expect.findings:
        if kind not in DETECTORS:
            raise ScenarioError(file, f"expect.findings.{kind}", f"unknown detector; choose one of: {', '.join(DETECTORS)}")
    keys = {call.key for trajectory in trajectories for _, call in trajectory.calls()}
    for key in spec.expect.calls:
        if key not in keys:
            raise ScenarioError(file, f"expect.calls.{key}", f"no call {key!r} in the trajectory (keys: {', '.join(sorted(keys))})")
