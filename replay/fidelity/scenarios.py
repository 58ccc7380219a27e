"""Counterexamples as scenario files: the world, the calls as a trajectory, a policy that makes a
divergence visible as a pair class, and the classes the replay gives — so ``litmus-replay run`` replays
each one and checks it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from litmus_replay.envs.runtime import Runtime

from ..engine import Replayer
from ..model import Trajectory
from ..policy import Policy, PolicySpec
from .lab import Counterexample

__all__ = ["FIDELITY_POLICY", "scenario_document", "write_counterexample"]

# Flags every applied change and every call acting as someone other than the declared principal, so a
# call one world refused and the other applied, or resolved to another principal, is a divergent pair.
FIDELITY_POLICY: dict[str, Any] = {
    "rules": [
        {"id": "applied-change", "when": "effects.counts.total > 0",
         "description": "Any change a world applied: a refusal on one side only shows as a divergent pair."},
        {"id": "other-principal", "when": "principal != declared_principal",
         "description": "The call acted as someone other than the principal the trajectory declares."},
    ]
}


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-") or "divergence"


def scenario_document(example: Counterexample, name: str, replayer: Replayer) -> dict[str, Any]:
    """The scenario for one counterexample, with the classes its replay gives as the expectation."""
    principal = example.steps[0].request["principal"]
    turns = []
    for step in example.steps:
        call: dict[str, Any] = {"tool": step.request["tool"], "arguments": step.request["params"]}
        if step.request["principal"] != principal:
            call["principal"] = step.request["principal"]
        turns.append({"calls": [call]})
    divergence = example.divergence
    document: dict[str, Any] = {
        "format_version": 1,
        "name": name,
        "description": (
            f"Stub fidelity counterexample for {example.domain}"
            f"{f' (stub profile {example.profile})' if example.profile else ''}: {divergence.kind} at "
            f"{example.call_key}, {', '.join(divergence.classes)}. {divergence.detail}"
        ),
        "world": example.world,
        "policy": FIDELITY_POLICY,
        "trajectory": {"id": name, "principal": principal, "turns": turns},
    }
    replay = replayer.replay(Trajectory.model_validate(document["trajectory"]), example.world, name)
    document["expect"] = {
        "trajectory": replay.revalidation.revalidated.value,
        "calls": {call.key: call.pair.cls.value for call in replay.calls},
    }
    return document


def write_counterexample(example: Counterexample, directory: Path, index: int, stub_runtime: Runtime,
                         real_runtime: Runtime) -> Path:
    """Write one counterexample as ``NN-<kind>.yaml`` under ``directory``; returns its path."""
    directory.mkdir(parents=True, exist_ok=True)
    label = example.domain if example.profile is None else f"{example.domain}-{example.profile}"
    name = f"fidelity-{slug(label)}-{index:02d}-{slug(example.kind)}"
    replayer = Replayer(Policy.compile(PolicySpec.model_validate(FIDELITY_POLICY)), stub_runtime, real_runtime)
    document = scenario_document(example, name, replayer)
    path = directory / f"{index:02d}-{slug(example.kind)}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path
