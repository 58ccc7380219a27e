"""The causal graph drawn as inline SVG, laid out by turn, for the HTML report.

One column per turn that holds calls, the ``world`` (initial state) node in a column of its own on the
left, calls stacked in recorded order within their turn. Nodes are filled by pair class; critical,
divergent, counterfactual and symlink-escaping calls carry a badge and a heavier border. Edges are
styled by kind (data solid, state dashed, divergence red) and end in an arrowhead; the state edge a
symlink escape went through is drawn in its own colour and carries the class ``escape``.

Every node is a ``<g class="node ..." data-key="t2.c1">`` and every edge a
``<g class="edge ..." data-kind data-source data-target>``; each holds a ``<title>`` with the call's
arguments and outputs or the edge's evidence, which browsers show on hover. Everything recorded is
escaped: recorded content is hostile.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from html import escape
from typing import Any, Iterable, Sequence

import networkx as nx

from ..detectors import Finding
from ..engine import CallReplay, TrajectoryReplay
from ..graph import WORLD_NODE, call_nodes
from .cells import outcome_cell, preview
from .export import CLASS_COLOURS, EDGE_STYLES, WORLD_COLOURS

__all__ = ["ESCAPE_COLOUR", "Box", "escape_edges", "graph_svg", "layout"]

NODE_W, NODE_H = 176, 64
COL_GAP, ROW_GAP = 104, 40
MARGIN, HEADER = 24, 34
_LANES = 5  # parallel tracks in the corridor between two rows
ARC_ROOM = 56  # to the right of the last column, for arcs between calls of one turn
ESCAPE_COLOUR = "#7a1fa2"
BADGES = {  # mark -> (text, background)
    "critical": ("CRITICAL", "#b42318"),
    "divergent": ("DIVERGENT", "#c4320a"),
    "counterfactual": ("COUNTERFACTUAL", "#5b6472"),
    "escape": ("ESCAPE", ESCAPE_COLOUR),
}


def _a(value: Any) -> str:
    """An attribute value, escaped (quotes included)."""
    return escape(str(value), quote=True)


@dataclass(frozen=True)
class Box:
    """Where a node sits: its column (0 is the initial state), row, and top-left corner."""

    column: int
    row: int
    x: float
    y: float


def layout(graph: nx.MultiDiGraph) -> dict[str, Box]:
    """Column per turn holding calls (the world node in column 0), calls in recorded order down each column."""
    calls = call_nodes(graph)
    turns = sorted({int(graph.nodes[node]["turn"]) for node in calls})
    column_of = {turn: index for index, turn in enumerate(turns, start=1)}
    rows: dict[int, int] = {}
    boxes: dict[str, Box] = {}

    def place(node: str, column: int) -> None:
        row = rows.get(column, 0)
        rows[column] = row + 1
        x = MARGIN + column * (NODE_W + COL_GAP)
        y = MARGIN + HEADER + row * (NODE_H + ROW_GAP)
        boxes[node] = Box(column, row, x, y)

    if WORLD_NODE in graph:
        place(WORLD_NODE, 0)
    for node in calls:
        place(node, column_of[int(graph.nodes[node]["turn"])])
    return boxes


def escape_edges(graph: nx.MultiDiGraph, findings: Iterable[Finding]) -> tuple[set[tuple[str, str, Any]], set[str]]:
    """The state edges symlink escapes went through (``(source, target, key)``) and the escaping calls.

    A ``symlink_escape`` finding names the link makers then the escaping call, and the links (resource ids)
    in its evidence: the edge is the real-world state edge from a maker to the call over one of those links.
    """
    edges: set[tuple[str, str, Any]] = set()
    calls: set[str] = set()
    for finding in findings:
        if finding.kind != "symlink_escape" or not finding.nodes:
            continue
        *makers, call = finding.nodes
        calls.add(call)
        links = set(finding.evidence.get("links") or ())
        if call not in graph:
            continue
        for source, _, key, data in graph.in_edges(call, keys=True, data=True):
            if data.get("kind") == "state" and source in makers and data.get("resource") in links:
                edges.add((source, call, key))
    return edges, calls


def _json(value: Any, limit: int = 240) -> str:
    return preview(value, limit)


def _node_title(node: str, attrs: dict[str, Any], call: CallReplay | None) -> str:
    if call is None:
        return f"{node}: {attrs.get('label', 'initial state')}"
    lines = [
        f"{call.key} · {call.call.tool} · turn {call.turn}",
        f"class: {call.pair.cls.value}" + (f" ({call.pair.reason.value})" if call.pair.reason else ""),
        call.pair.explanation,
        f"proposal: {call.proposal.policy_verdict} as {call.proposal.principal}"
        + (f" · commit: {call.commit.policy_verdict} as {call.commit.principal}" if call.commit else " · no commit"),
        f"stub: {outcome_cell(call.stub)} · real: {outcome_cell(call.real)}",
        "arguments: " + _json(call.call.arguments),
    ]
    if call.call.result is not None:
        lines.append("recorded output: " + _json(call.call.result.output))
    lines.append("stub output: " + _json(call.stub.output))
    if call.real is not None:
        lines.append("real output: " + _json(call.real.output))
        if call.real.error:
            lines.append(f"real error: {call.real.error}")
    if call.harness_error:
        lines.append(f"harness error: {call.harness_error}")
    return "\n".join(lines)


def _truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _node_svg(node: str, attrs: dict[str, Any], box: Box, call: CallReplay | None, escaping: bool) -> str:
    is_call = attrs.get("kind") == "call"
    pair_class = str(attrs.get("pair_class", "")) if is_call else ""
    fill, stroke = CLASS_COLOURS.get(pair_class, WORLD_COLOURS)
    marks = [mark for mark in ("critical", "divergent", "counterfactual") if attrs.get(mark)]
    if escaping:
        marks.append("escape")
    classes = ["node", "call" if is_call else "initial", *([f"cls-{pair_class}"] if pair_class else []), *marks]
    width = 4 if ("critical" in marks or "escape" in marks) else 3 if "divergent" in marks else 1.5
    parts = [
        f'<g class="{_a(" ".join(classes))}" data-key="{_a(node)}" data-turn="{_a(attrs.get("turn", 0))}"'
        + (f' data-class="{_a(pair_class)}"' if pair_class else "")
        + f' transform="translate({box.x:.0f},{box.y:.0f})">',
        f"<title>{escape(_node_title(node, attrs, call))}</title>",
        f'<a href="#{_a("call-" + node if is_call else "summary")}">',
        f'<rect class="body" width="{NODE_W}" height="{NODE_H}" rx="9" fill="{fill}" stroke="{stroke}"'
        f' stroke-width="{width}"' + (' stroke-dasharray="7 3"' if "counterfactual" in marks else "") + "/>",
    ]
    if "divergent" in marks:
        parts.append(f'<rect class="ring" x="-4" y="-4" width="{NODE_W + 8}" height="{NODE_H + 8}" rx="12"'
                     f' fill="none" stroke="{BADGES["divergent"][1]}" stroke-width="1.5"/>')
    if is_call:
        tool = _truncate(str(attrs.get("tool", "")), 24)
        status = f"stub {attrs.get('stub_status', '')} · real {attrs.get('real_status', '')}"
        if attrs.get("real_error_code"):
            status += f" {attrs['real_error_code']}"
        parts += [
            f'<text x="10" y="19" class="key">{escape(node)}</text>',
            f'<text x="{NODE_W - 10}" y="19" class="cls" text-anchor="end">{escape(pair_class.replace("_", " "))}</text>',
            f'<text x="10" y="38" class="tool">{escape(tool)}</text>',
            f'<text x="10" y="55" class="status">{escape(_truncate(status, 30))}</text>',
        ]
    else:
        parts += [
            f'<text x="10" y="24" class="key">{escape(node)}</text>',
            f'<text x="10" y="44" class="tool">{escape(str(attrs.get("label", "initial state")))}</text>',
        ]
    parts.append("</a>")
    right = NODE_W - 6
    for mark in reversed(marks):
        text, colour = BADGES[mark]
        badge_w = 7 * len(text) + 10
        right -= badge_w
        parts.append(
            f'<g class="badge badge-{mark}" transform="translate({right},-9)">'
            f'<rect width="{badge_w}" height="16" rx="8" fill="{colour}"/>'
            f'<text x="{badge_w / 2:.0f}" y="12" text-anchor="middle">{text}</text></g>'
        )
        right -= 4
    parts.append("</g>")
    return "".join(parts)


def _edge_path(source: Box, target: Box, offset: float, lane: int = 0) -> str:
    """An edge's path: an arc for calls of one turn, a curve between neighbouring columns, and for an edge
    that skips columns a detour along the corridor below both rows, so it never passes behind a node."""
    x1, y1 = source.x + NODE_W, source.y + NODE_H / 2 + offset
    if source.column == target.column:  # calls of one turn: an arc on the right of the column
        x2, y2 = target.x + NODE_W, target.y + NODE_H / 2 + offset
        bulge = x1 + 34 + abs(offset) * 2 + abs(target.row - source.row) * 6
        return f"M{x1:.1f},{y1:.1f} C{bulge:.1f},{y1:.1f} {bulge:.1f},{y2:.1f} {x2 + 2:.1f},{y2:.1f}"
    x2, y2 = target.x - 2, target.y + NODE_H / 2 + offset
    if abs(target.column - source.column) == 1:
        pull = max(48.0, abs(x2 - x1) / 2)
        return f"M{x1:.1f},{y1:.1f} C{x1 + pull:.1f},{y1:.1f} {x2 - pull:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
    corridor = max(source.y, target.y) + NODE_H + 8 + (lane % _LANES) * 4.5
    h = COL_GAP / 4
    return (
        f"M{x1:.1f},{y1:.1f} C{x1 + h:.1f},{y1:.1f} {x1 + h:.1f},{corridor:.1f} {x1 + 2 * h:.1f},{corridor:.1f} "
        f"L{x2 - 2 * h:.1f},{corridor:.1f} C{x2 - h:.1f},{corridor:.1f} {x2 - h:.1f},{y2:.1f} {x2:.1f},{y2:.1f}"
    )


def _edge_title(source: str, target: str, data: dict[str, Any], escaping: bool) -> str:
    kind = data.get("kind", "")
    evidence = {name: value for name, value in data.items() if name != "kind"}
    head = f"{kind} edge {source} → {target}" + (" (symlink escape)" if escaping else "")
    explanation = evidence.pop("explanation", None)
    lines = [head] + ([str(explanation)] if explanation else [])
    lines.append(json.dumps(evidence, ensure_ascii=False, sort_keys=True, default=str))
    return "\n".join(lines)


def _defs() -> str:
    colours = {kind: colour for kind, (colour, _) in EDGE_STYLES.items()}
    colours["escape"] = ESCAPE_COLOUR
    markers = "".join(
        f'<marker id="arrow-{kind}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9"'
        f' markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="{colour}"/></marker>'
        for kind, colour in colours.items()
    )
    return f"<defs>{markers}</defs>"


def graph_svg(
    graph: nx.MultiDiGraph, result: TrajectoryReplay | None = None, findings: Sequence[Finding] = ()
) -> str:
    """The graph as an inline ``<svg>`` element (see the module docstring for its structure)."""
    boxes = layout(graph)
    calls = {call.key: call for call in result.calls} if result is not None else {}
    escape_set, escaping_calls = escape_edges(graph, findings)
    columns = max((box.column for box in boxes.values()), default=0) + 1
    rows = max((box.row for box in boxes.values()), default=0) + 1
    width = MARGIN * 2 + columns * NODE_W + (columns - 1) * COL_GAP + ARC_ROOM
    height = MARGIN * 2 + HEADER + rows * (NODE_H + ROW_GAP)  # the last ROW_GAP: the corridor below the bottom row
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="causal-graph" width="{width}" height="{height}"'
        f' viewBox="0 0 {width} {height}" role="img" aria-label="causal graph of the calls, by turn">',
        _defs(),
    ]
    headers: dict[int, str] = {0: "initial state"}
    for node in call_nodes(graph):
        headers.setdefault(boxes[node].column, f"turn {graph.nodes[node]['turn']}")
    for column, text in sorted(headers.items()):
        x = MARGIN + column * (NODE_W + COL_GAP) + NODE_W / 2
        out.append(f'<text class="turn-label" x="{x:.0f}" y="{MARGIN + 12}" text-anchor="middle">{escape(text)}</text>')

    out.append('<g class="edges">')
    by_pair: dict[tuple[str, str], list[tuple[Any, dict[str, Any]]]] = {}
    for source, target, key, data in graph.edges(keys=True, data=True):
        by_pair.setdefault((source, target), []).append((key, data))
    lanes: dict[int, int] = {}  # corridor (the row above it) -> edges routed along it so far
    for (source, target), edges in by_pair.items():
        if source not in boxes or target not in boxes:
            continue
        for index, (key, data) in enumerate(edges):
            lane = 0
            if abs(boxes[target].column - boxes[source].column) > 1:
                corridor = max(boxes[source].row, boxes[target].row)
                lane = lanes.get(corridor, 0)
                lanes[corridor] = lane + 1
            kind = str(data.get("kind", ""))
            escaping = (source, target, key) in escape_set
            offset = (index - (len(edges) - 1) / 2) * 7
            path = _edge_path(boxes[source], boxes[target], offset, lane)
            colour, style = EDGE_STYLES.get(kind, ("#000", "solid"))
            marker = "escape" if escaping else kind if kind in EDGE_STYLES else "data"
            if escaping:
                colour = ESCAPE_COLOUR
            dash = ' stroke-dasharray="6 4"' if style == "dashed" else ""
            stroke = 3.2 if escaping else 2.2 if kind == "divergence" else 1.4
            classes = " ".join(["edge", f"edge-{kind}", *(["escape"] if escaping else [])])
            out.append(
                f'<g class="{_a(classes)}" data-kind="{_a(kind)}" data-source="{_a(source)}" data-target="{_a(target)}">'
                f"<title>{escape(_edge_title(source, target, data, escaping))}</title>"
                f'<path class="hit" d="{path}" fill="none" stroke="transparent" stroke-width="10"/>'
                f'<path class="line" d="{path}" fill="none" stroke="{colour}" stroke-width="{stroke}"{dash}'
                f' marker-end="url(#arrow-{marker})"/></g>'
            )
    out.append("</g>")

    out.append('<g class="nodes">')
    for node, box in boxes.items():
        out.append(_node_svg(node, dict(graph.nodes[node]), box, calls.get(node), node in escaping_calls))
    out.append("</g></svg>")
    return "\n".join(out)
