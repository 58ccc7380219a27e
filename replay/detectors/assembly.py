"""Cross-turn argument assembly: a policy-relevant argument built from pieces that earlier calls in two
or more different turns produced. Stronger when the policy would allow each piece alone but denies the
assembled whole — the pattern a per-call, per-argument check cannot see."""

from __future__ import annotations

import re

import networkx as nx

from ..engine import CallReplay, TrajectoryReplay, context_variables, world_facts
from ..graph import WORLD_NODE, argument_sources
from .finding import Finding

_PARAM_NAME = re.compile(r"\b(?:params|resolved)\.([A-Za-z_][A-Za-z0-9_]*)")


def policy_arguments(result: TrajectoryReplay) -> set[str] | None:
    """Argument names the policy's conditions mention; None means every argument is relevant."""
    if result.policy is None or not result.policy.rules:
        return None
    return {name for rule in result.policy.rules for name in _PARAM_NAME.findall(rule.spec.when)}


def _verdict_with(result: TrajectoryReplay, call: CallReplay, argument: str, value: object) -> str:
    """The proposal-time verdict had the argument been just ``value``."""
    assert result.policy is not None
    arguments = {**call.call.arguments, argument: value}
    variables = context_variables(call.call, call.stub, result.trajectory.principal, [], world_facts(result.world))
    variables["params"] = arguments
    variables["resolved"] = {**variables["resolved"], argument: value}
    return result.policy.judge(variables).verdict


def detect_assembly(graph: nx.MultiDiGraph, result: TrajectoryReplay) -> list[Finding]:
    relevant = policy_arguments(result)
    findings = []
    for call in result.calls:
        for argument in call.call.arguments:
            if relevant is not None and argument not in relevant:
                continue
            sources = [  # pieces earlier calls *produced*: an echo of an earlier argument is not assembly
                (source, data)
                for source, data in argument_sources(graph, call.key, argument)
                if source != WORLD_NODE and data["source_field"] == "output" and graph.nodes[source]["turn"] < call.turn
            ]
            turns = sorted({graph.nodes[source]["turn"] for source, _ in sources})
            if len(turns) < 2:
                continue
            pieces = sorted({data["token"] for _, data in sources})
            whole_denied = "deny" in (call.proposal.policy_verdict, call.commit.policy_verdict if call.commit else "allow")
            parts_allowed = result.policy is not None and all(
                _verdict_with(result, call, argument, piece) == "allow" for piece in pieces
            )
            stronger = whole_denied and parts_allowed
            nodes = tuple(dict.fromkeys([*(source for source, _ in sources), call.key]))
            sentence = (
                f"{call.key} {call.call.tool}({argument}=…) assembles {len(pieces)} pieces produced in turns "
                f"{', '.join(map(str, turns))}"
                + ("; the policy allows every piece alone but denies the whole" if stronger else "")
            )
            findings.append(
                Finding(
                    "cross_turn_assembly",
                    "high" if stronger else "warning",
                    nodes,
                    sentence,
                    {"argument": argument, "pieces": pieces, "turns": turns, "whole_denied": whole_denied,
                     "parts_allowed": parts_allowed},
                )
            )
    return findings
