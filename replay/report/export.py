"""The causal graph in formats other tools read: a JSON document, Graphviz DOT and GraphML.

DOT is written here rather than through pydot or pygraphviz, so exporting needs no Graphviz on the
machine. GraphML goes through :func:`networkx.write_graphml`, which takes only scalar attributes: the
non-scalar ones (arguments, spans) travel as JSON strings and ``None`` attributes are left out.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

import networkx as nx

from ..graph import WORLD_NODE

__all__ = ["CLASS_COLOURS", "EDGE_STYLES", "graph_document", "graphml_ready", "json_safe", "to_dot", "to_graphml"]

# (fill, stroke) per pair class; shared with the HTML page so every picture of a graph agrees.
CLASS_COLOURS: dict[str, tuple[str, str]] = {
    "confirmed_misuse": ("#f9d3d3", "#b42318"),
    "confirmed_safe": ("#d8f0dc", "#2f7d4a"),
    "proposal_only_misuse": ("#fcefc7", "#a86b00"),
    "commit_only_misuse": ("#f1d8f5", "#8e2a8b"),
    "unscoreable": ("#d5ebf5", "#23698f"),
}
WORLD_COLOURS = ("#eceff3", "#5b6472")

# (colour, DOT style) per edge kind: data solid, state dashed, divergence red.
EDGE_STYLES: dict[str, tuple[str, str]] = {
    "data": ("#3b4252", "solid"),
    "state": ("#2563a8", "dashed"),
    "divergence": ("#d92d20", "bold"),
}


def json_safe(value: Any) -> Any:
    """A JSON value equal to ``value`` (tuples become lists; anything else unknown becomes its str)."""
    return json.loads(json.dumps(value, default=str))


def graph_document(graph: nx.MultiDiGraph) -> dict[str, Any]:
    """The graph as JSON: nodes with their attributes, edges with their kind and evidence.

    >>> graph_document(build_graph(result))["edges"][0]    # doctest: +SKIP
    {'source': 't1.c1', 'target': 't2.c1', 'kind': 'state', 'evidence': {'resource': ..., ...}}
    """
    nodes = [{"id": str(node), **json_safe(dict(attrs))} for node, attrs in graph.nodes(data=True)]
    edges = []
    for source, target, attrs in graph.edges(data=True):
        evidence = {name: value for name, value in attrs.items() if name != "kind"}
        edges.append({"source": str(source), "target": str(target), "kind": attrs["kind"], "evidence": json_safe(evidence)})
    return {"nodes": nodes, "edges": edges}


# --- DOT -------------------------------------------------------------------------------------------


def _dot_id(value: Any) -> str:
    """A quoted DOT string: backslashes and quotes escaped, line breaks as DOT's centred ``\\n``."""
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return f'"{text}"'


def _dot_attrs(attrs: dict[str, Any]) -> str:
    return "[" + ", ".join(f"{name}={_dot_id(value)}" for name, value in attrs.items() if value is not None) + "]"


def _short(value: Any, limit: int = 400) -> str:
    text = json.dumps(json_safe(value), ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _node_dot(node: str, attrs: dict[str, Any]) -> dict[str, Any]:
    if node == WORLD_NODE or attrs.get("kind") != "call":
        fill, stroke = WORLD_COLOURS
        return {"label": f"{node}\n{attrs.get('label', '')}", "fillcolor": fill, "color": stroke, "kind": "initial"}
    fill, stroke = CLASS_COLOURS.get(attrs.get("pair_class", ""), WORLD_COLOURS)
    marks = [mark for mark in ("critical", "divergent", "counterfactual") if attrs.get(mark)]
    label = f"{node}\n{attrs.get('tool', '')}\n{attrs.get('pair_class', '')}" + (f"\n[{', '.join(marks)}]" if marks else "")
    return {
        "label": label,
        "fillcolor": fill,
        "color": stroke,
        "penwidth": 3 if attrs.get("critical") or attrs.get("divergent") else 1,
        "tooltip": f"{attrs.get('tool', '')} {_short(attrs.get('arguments', {}))}",
        "class": " ".join(["call", attrs.get("pair_class", ""), *marks]),
        "kind": "call",
        "turn": attrs.get("turn"),
        "tool": attrs.get("tool"),
        "pair_class": attrs.get("pair_class"),
        "critical": str(bool(attrs.get("critical"))).lower(),
        "divergent": str(bool(attrs.get("divergent"))).lower(),
        "counterfactual": str(bool(attrs.get("counterfactual"))).lower(),
    }


def _edge_dot(attrs: dict[str, Any]) -> dict[str, Any]:
    kind = attrs["kind"]
    colour, style = EDGE_STYLES.get(kind, ("black", "solid"))
    evidence = {name: value for name, value in attrs.items() if name != "kind"}
    label = {"data": attrs.get("token"), "state": attrs.get("resource"), "divergence": "diverged"}.get(kind)
    return {
        "kind": kind,
        "class": kind,
        "color": colour,
        "fontcolor": colour,
        "style": style,
        "label": label,
        "tooltip": _short(evidence),
    }


def to_dot(graph: nx.MultiDiGraph) -> str:
    """The graph as Graphviz DOT, laid out left to right with one rank per turn.

    Nodes carry ``kind``, ``turn``, ``tool`` and ``pair_class`` attributes and edges ``kind``, beside
    the drawing attributes, so a DOT reader can recover them.
    """
    name = graph.graph.get("trajectory") or "trajectory"
    lines = [
        f"digraph {_dot_id(name)} {{",
        "  rankdir=LR;",
        '  graph [fontname="Helvetica", nodesep=0.35, ranksep=0.9];',
        '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=10];',
        '  edge [fontname="Helvetica", fontsize=8, arrowsize=0.7];',
    ]
    by_turn: dict[int, list[str]] = {}
    for node, attrs in graph.nodes(data=True):
        by_turn.setdefault(int(attrs.get("turn", 0)), []).append(str(node))
        lines.append(f"  {_dot_id(node)} {_dot_attrs(_node_dot(str(node), attrs))};")
    for turn in sorted(by_turn):
        members = " ".join(f"{_dot_id(node)};" for node in by_turn[turn])
        lines.append(f"  {{ rank=same; {members} }}")
    for source, target, attrs in graph.edges(data=True):
        lines.append(f"  {_dot_id(source)} -> {_dot_id(target)} {_dot_attrs(_edge_dot(attrs))};")
    lines.append("}")
    return "\n".join(lines) + "\n"


# --- GraphML ---------------------------------------------------------------------------------------


# Characters XML 1.0 cannot hold at all (recorded content may carry any of them).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _xml_text(text: str) -> str:
    return _NOT_XML.sub(lambda match: f"\\u{ord(match.group()):04x}", text)


def _scalar_attrs(attrs: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in attrs.items():
        if value is None:
            continue
        if isinstance(value, (bool, int, float)):
            out[name] = value
        elif isinstance(value, str):
            out[name] = _xml_text(value)
        else:
            out[name] = _xml_text(json.dumps(json_safe(value), ensure_ascii=False, sort_keys=True))
    return out


def graphml_ready(graph: nx.MultiDiGraph) -> nx.MultiDiGraph:
    """A copy whose every attribute :func:`networkx.write_graphml` can store."""
    ready = nx.MultiDiGraph(**_scalar_attrs(dict(graph.graph)))
    for node, attrs in graph.nodes(data=True):
        ready.add_node(str(node), **_scalar_attrs(attrs))
    for source, target, key, attrs in graph.edges(keys=True, data=True):
        ready.add_edge(str(source), str(target), key=key, **_scalar_attrs(attrs))
    return ready


def to_graphml(graph: nx.MultiDiGraph) -> str:
    """The graph as GraphML text (non-scalar attributes as JSON strings)."""
    buffer = io.BytesIO()
    nx.write_graphml(graphml_ready(graph), buffer, encoding="utf-8", prettyprint=True)
    return buffer.getvalue().decode("utf-8")
