"""Cross-turn argument assembly, in two forms, both of a call the policy denies (at proposal or at
commit): assembling what is allowed is ordinary work (a round trip from two searches, a meeting's guests
from an email and a contact list), and only a denied whole is what a per-call check might have missed.

- within one argument: a policy-relevant argument built from pieces that earlier calls in two or more
  different turns produced, when no one earlier output carried it whole. Stronger when the policy would
  allow each piece alone but denies the assembled whole — the pattern a per-call, per-argument check
  cannot see;
- across the arguments of one call: the arguments a denying rule reads came from different earlier
  turns (the destination from one output, the amount from another), and no one turn supplied them all.
"""

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
    """The proposal-time verdict had the argument been just ``value``, in the same context otherwise
    (the history and state the proposal was judged with)."""
    assert result.policy is not None
    variables = call.judged_variables()
    if variables is None:
        variables = context_variables(call.call, call.stub, result.trajectory.principal, [], world_facts(result.world))
    variables["params"] = {**variables["params"], argument: value}
    variables["resolved"] = {**variables["resolved"], argument: value}
    return result.policy.judge(variables).verdict


def _produced_sources(graph: nx.MultiDiGraph, call: CallReplay, argument: str) -> list[tuple[str, dict]]:
    """Pieces of ``argument`` that calls in earlier turns *produced* (an echo of an earlier argument is not)."""
    return [
        (source, data)
        for source, data in argument_sources(graph, call.key, argument)
        if source != WORLD_NODE and data["source_field"] == "output" and graph.nodes[source]["turn"] < call.turn
    ]


def _denying_arguments(result: TrajectoryReplay, call: CallReplay) -> set[str]:
    """Argument names the rules that denied the call read, at proposal or at commit time."""
    if result.policy is None:
        return set()
    denied = set(call.proposal_judgement.matched)
    if call.commit_judgement is not None:
        denied |= set(call.commit_judgement.matched)
    return {name for rule in result.policy.rules if rule.spec.id in denied for name in _PARAM_NAME.findall(rule.spec.when)}


def _across_arguments(graph: nx.MultiDiGraph, result: TrajectoryReplay, call: CallReplay) -> Finding | None:
    names = sorted(_denying_arguments(result, call) & set(call.call.arguments))
    turns_of: dict[str, set[int]] = {}
    sources: list[str] = []
    for name in names:
        found = _produced_sources(graph, call, name)
        if found:
            turns_of[name] = {graph.nodes[source]["turn"] for source, _ in found}
            sources.extend(source for source, _ in found)
    if len(turns_of) < 2 or set.intersection(*turns_of.values()):
        return None  # one argument, or one turn supplied every argument: carried, not assembled
    turns = sorted(set.union(*turns_of.values()))
    where = "; ".join(f"{name} from turn{'s' if len(t) > 1 else ''} {', '.join(map(str, sorted(t)))}" for name, t in turns_of.items())
    return Finding(
        "cross_turn_assembly",
        "warning",
        tuple(dict.fromkeys([*sources, call.key])),
        f"{call.key} {call.call.tool}: the arguments the denying rule reads were assembled across turns ({where})",
        {"form": "across_arguments", "arguments": {name: sorted(t) for name, t in turns_of.items()}, "turns": turns},
    )


def _carried_whole(value: object, sources: list[tuple[str, dict]], argument: str) -> bool:
    """Whether one earlier output carried the argument's whole value (its other pieces are echoes)."""
    return isinstance(value, str) and any(
        data.get("argument") == argument and data.get("span") == [0, len(value)] for _, data in sources)


def detect_assembly(graph: nx.MultiDiGraph, result: TrajectoryReplay) -> list[Finding]:
    relevant = policy_arguments(result)
    findings = []
    for call in result.calls:
        if "deny" not in (call.proposal.policy_verdict, call.commit.policy_verdict if call.commit else "allow"):
            continue
        within = len(findings)
        for argument in call.call.arguments:
            if relevant is not None and argument not in relevant:
                continue
            sources = _produced_sources(graph, call, argument)
            turns = sorted({graph.nodes[source]["turn"] for source, _ in sources})
            if len(turns) < 2 or _carried_whole(call.call.arguments[argument], sources, argument):
                continue
            pieces = sorted({data["token"] for _, data in sources})
            parts_allowed = result.policy is not None and all(
                _verdict_with(result, call, argument, piece) == "allow" for piece in pieces
            )
            stronger = parts_allowed  # the whole is denied (above)
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
                    {"form": "within_argument", "argument": argument, "pieces": pieces, "turns": turns,
                     "whole_denied": True, "parts_allowed": parts_allowed},
                )
            )
        if len(findings) == within:  # an argument already assembled from pieces says enough about this call
            across = _across_arguments(graph, result, call)
            if across is not None:
                findings.append(across)
    return findings
