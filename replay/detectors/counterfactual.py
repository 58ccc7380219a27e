"""Counterfactual arguments: a recorded argument that carries a piece (an identifier, a path, an amount)
only a recorded output produced, which the real world's output of the same call does not. The recorded
call then acted on something the real world never offered, so neither it nor what depends on it can be
replayed as the agent meant; the graph marks them counterfactual, and this detector says so in words."""

from __future__ import annotations

import networkx as nx

from ..engine import TrajectoryReplay
from ..graph import call_nodes, edges_of_kind
from .finding import Finding


def _downstream(graph: nx.MultiDiGraph, start: str) -> list[str]:
    """Calls reached from ``start`` along any edge but divergence ones, in recorded order."""
    seen: set[str] = set()
    frontier = [start]
    while frontier:
        node = frontier.pop()
        for _, successor, kind in graph.out_edges(node, data="kind"):
            if kind != "divergence" and successor not in seen and successor != start:
                seen.add(successor)
                frontier.append(successor)
    order = {node: index for index, node in enumerate(call_nodes(graph))}
    return sorted((n for n in seen if n in order), key=order.__getitem__)


def detect_counterfactual_arguments(graph: nx.MultiDiGraph, result: TrajectoryReplay) -> list[Finding]:
    by_target: dict[str, list[tuple[str, str, str]]] = {}
    for source, target, data in edges_of_kind(graph, "divergence"):
        by_target.setdefault(target, []).append((source, data["argument"], data["token"]))
    findings = []
    for target in call_nodes(graph):
        pieces = by_target.get(target)
        if not pieces:
            continue
        sources = list(dict.fromkeys(source for source, _, _ in pieces))
        dependants = _downstream(graph, target)
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
