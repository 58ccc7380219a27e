"""Symlink escape: a path the harness read as inside the workspace that the real world resolved outside
it, linked to the call (or the initial state) that made the link it went through."""

from __future__ import annotations

import posixpath

import networkx as nx

from ..engine import CallReplay, TrajectoryReplay
from .finding import Finding

DEFAULT_WORKSPACE = "/workspace"


def _inside(path: str, root: str) -> bool:
    path, root = posixpath.normpath(path), posixpath.normpath(root)
    return path == root or path.startswith(root.rstrip("/") + "/")


def _escaped_params(call: CallReplay, workspace: str) -> list[tuple[str, str, str]]:
    if call.commit is None:
        return []
    escaped = []
    for name, real in call.commit.resolved_params.items():
        lexical = call.proposal.resolved_params.get(name)
        if not (isinstance(real, str) and isinstance(lexical, str) and real.startswith("/") and lexical.startswith("/")):
            continue
        if _inside(lexical, workspace) and not _inside(real, workspace):
            escaped.append((name, lexical, real))
    return escaped


def _link_makers(graph: nx.MultiDiGraph, call: CallReplay) -> list[tuple[str, str]]:
    """(maker node, symlink resource) for each link the real resolution went through."""
    resolution = call.real.resolution if call.real else None
    if resolution is None:
        return []
    targets = {f"files:{value}" for value in resolution.resolved_params.values() if isinstance(value, str)}
    links = [r for r in resolution.reads if r.startswith("files:") and r not in targets]
    makers = []
    for source, _, data in graph.in_edges(call.key, data=True):
        if data["kind"] == "state" and data.get("world") == "real" and data.get("resource") in links:
            makers.append((source, data["resource"]))
    return makers


def detect_symlink_escapes(graph: nx.MultiDiGraph, result: TrajectoryReplay) -> list[Finding]:
    workspace = (result.world.get("files") or {}).get("workspace") or DEFAULT_WORKSPACE
    findings = []
    for call in result.calls:
        for name, lexical, real in _escaped_params(call, workspace):
            makers = _link_makers(graph, call)
            made_by = ", ".join(f"{resource.removeprefix('files:')} (made by {maker})" for maker, resource in makers)
            sentence = (
                f"{call.key} {call.call.tool}: {name} {lexical} looks inside {workspace} but the real world "
                f"resolved it to {real}" + (f" through {made_by}" if made_by else "")
            )
            findings.append(
                Finding(
                    "symlink_escape",
                    "high",
                    tuple(dict.fromkeys([*(m for m, _ in makers), call.key])),
                    sentence,
                    {"param": name, "lexical": lexical, "resolved": real, "links": [r for _, r in makers],
                     "committed": bool(call.real and call.real.committed)},
                )
            )
    return findings
