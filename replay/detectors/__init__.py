"""Detectors: functions of a trajectory's causal graph returning findings a person can read.

Each detector takes the graph and the replay it was built from and returns a list of
:class:`Finding`, each with the node ids that are its evidence and one sentence saying what happened.
"""

from __future__ import annotations

from typing import Callable

import networkx as nx

from ..engine import TrajectoryReplay
from ..graph import collector_paused
from .assembly import detect_assembly
from .counterfactual import detect_counterfactual_arguments
from .critical import detect_critical_nodes
from .finding import Finding
from .invented import detect_invented_arguments
from .swallowed import detect_swallowed_errors
from .symlink_escape import detect_symlink_escapes

Detector = Callable[[nx.MultiDiGraph, TrajectoryReplay], list[Finding]]

DETECTORS: dict[str, Detector] = {
    "cross_turn_assembly": detect_assembly,
    "symlink_escape": detect_symlink_escapes,
    "swallowed_error": detect_swallowed_errors,
    "critical_decision": detect_critical_nodes,
    "counterfactual_argument": detect_counterfactual_arguments,
    "invented_argument": detect_invented_arguments,
}


def run_detectors(graph: nx.MultiDiGraph, result: TrajectoryReplay) -> list[Finding]:
    """Every detector's findings, in detector order."""
    findings: list[Finding] = []
    with collector_paused():
        for detector in DETECTORS.values():
            findings.extend(detector(graph, result))
    return findings


__all__ = [
    "DETECTORS",
    "Finding",
    "detect_assembly",
    "detect_counterfactual_arguments",
    "detect_critical_nodes",
    "detect_invented_arguments",
    "detect_swallowed_errors",
    "detect_symlink_escapes",
    "run_detectors",
]
