"""Counterfactual arguments: a recorded argument that carries a piece (an identifier, a path, an amount)
only a recorded output produced, which the real world's output of the same call does not. The recorded
call then acted on something the real world never offered, so neither it nor what depends on it can be
replayed as the agent meant; the graph marks them counterfactual, and this detector says so in words."""

from __future__ import annotations

import networkx as nx

from ..engine import TrajectoryReplay
from ..graph import call_nodes, edges_of_kind
from .finding import Finding


def _downstream(graph: nx.MultiDiGraph, start: str, claimed: set[str]) -> list[str]:
    """Calls reached from ``start`` along any edge but divergence ones and not claimed by an earlier
    counterfactual call (each dependant is told once, under the first divergence that reaches it)."""
    found: list[str] = []
    frontier = [start]
    successors = graph.succ
    while frontier:
        node = frontier.pop()
        for successor, edges in successors[node].items():
            if successor not in claimed and any(data["kind"] != "divergence" for data in edges.values()):
                claimed.add(successor)
                found.append(successor)
                frontier.append(successor)
    return found


def detect_counterfactual_arguments(graph: nx.MultiDiGraph, result: TrajectoryReplay) -> list[Finding]:
    by_target: dict[str, list[tuple[str, str, str]]] = {}
    for source, target, data in edges_of_kind(graph, "divergence"):
        by_target.setdefault(target, []).append((source, data["argument"], data["token"]))
    if not by_target:
        return []
    order = {node: position for position, node in enumerate(call_nodes(graph))}
    claimed = set(by_target)
    findings = []
    for target in sorted(by_target, key=order.__getitem__):
        pieces = by_target[target]
        sources = list(dict.fromkeys(source for source, _, _ in pieces))
        dependants = sorted(_downstream(graph, target, claimed), key=order.__getitem__)
        carried = ", ".join(f"{argument}={token!r} from {source}" for source, argument, token in pieces)
        sentence = (
            f"{target} {graph.nodes[target]['tool']}: {carried} came only from the recorded output, which the real "
            f"world's output does not carry: the recorded argument is counterfactual"
            + (f", and so {'is' if len(dependants) == 1 else 'are'} {', '.join(dependants)}" if dependants else "")
        )
        findings.append(Finding(
            "counterfactual_argument", "warning", (*sources, target, *dependants), sentence,
            {"pieces": [{"source": s, "argument": a, "token": t} for s, a, t in pieces], "dependants": dependants},
        ))
    return findings
