"""The causal graph drawn as inline SVG, laid out by turn, for the HTML report.

One column per turn that holds calls, the ``world`` (initial state) node in a column of its own on the
left, calls stacked in recorded order within their turn. Nodes are filled by pair class; critical,
divergent, counterfactual and symlink-escaping calls carry a badge and a heavier border. Edges are
styled by kind (data solid, state dashed, divergence red) and end in an arrowhead; the state edge a
symlink escape went through is drawn in its own colour and carries the class ``escape``.

Every node is a ``<g class="node ..." data-key="t2.c1">`` and every edge a
``<g class="edge ..." data-kind data-source data-target>``; each holds a ``<title>`` with the call's
arguments and outputs or the edge's evidence, which browsers show on hover. How nodes and edges look
comes from their classes (``EDGE_CSS``, which the page carries once), not from attributes repeated on
every element: a batch writes many pages. Everything recorded is escaped: recorded content is hostile.
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
from .cells import outcome_cell, preview, recorded_as_stub
from .export import CLASS_COLOURS, EDGE_STYLES, WORLD_COLOURS

__all__ = ["EDGE_CSS", "ESCAPE_COLOUR", "Box", "escape_edges", "escape_text", "graph_svg", "layout"]

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


def _policy_line(call: CallReplay) -> str:
    """The policy's verdicts, said as the policy's (an allow at commit is not the world's answer), with the
    principal once where both moments have the same."""
    proposal, commit = call.proposal, call.commit
    if commit is None:
        return f"policy: {proposal.policy_verdict} at proposal as {proposal.principal} · no commit"
    if commit.principal == proposal.principal:
        return f"policy: {proposal.policy_verdict} at proposal, {commit.policy_verdict} at commit · as {proposal.principal}"
    return (f"policy: {proposal.policy_verdict} at proposal as {proposal.principal}, {commit.policy_verdict} at commit "
            f"as {commit.principal}")


def _node_title(node: str, attrs: dict[str, Any], call: CallReplay | None) -> str:
    if call is None:
        return f"{node}: {attrs.get('label', 'initial state')}"
    lines = [
        f"{call.key} · {call.call.tool} · turn {call.turn}",
        f"class: {call.pair.cls.value}" + (f" ({call.pair.reason.value})" if call.pair.reason else ""),
        call.pair.explanation,
        _policy_line(call),
        f"worlds: stub {outcome_cell(call.stub)}, real {outcome_cell(call.real)}",
        "arguments: " + _json(call.call.arguments),
    ]
    if call.call.result is not None:
        lines.append("recorded output: " + ("the same as the stub" if recorded_as_stub(call) else _json(call.call.result.output)))
    lines.append("stub output: " + _json(call.stub.output))
    if call.real is not None:
        same = call.real.output == call.stub.output
        lines.append("real output: " + ("the same" if same else _json(call.real.output)))
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
    marks = [mark for mark in ("critical", "divergent", "counterfactual") if attrs.get(mark)]
    if escaping:
        marks.append("escape")
    classes = ["node", "call" if is_call else "initial", *([f"cls-{pair_class}"] if pair_class else []), *marks]
    parts = [
        f'<g class="{_a(" ".join(classes))}" data-key="{_a(node)}" transform="translate({box.x:.0f},{box.y:.0f})">',
        f"<title>{escape_text(_node_title(node, attrs, call))}</title>",
        f'<a href="#{_a("call-" + node if is_call else "summary")}">',
        f'<rect class="body" width="{NODE_W}" height="{NODE_H}" rx="9"/>',  # its look: NODE_CSS, by class
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


def escape_text(text: str) -> str:
    """Recorded content escaped for an element's text: ``&``, ``<``, ``>`` and ``'`` as in an attribute, but
    ``"`` left alone (JSON is full of them, and a page holds a lot of JSON)."""
    return escape(text, quote=False).replace("'", "&#x27;")


def _n(value: float) -> str:
    """A coordinate with one decimal at most, and none when it is whole: paths are most of a graph's bytes."""
    text = f"{value:.1f}"
    return text[:-2] if text.endswith(".0") else text


def _edge_path(source: Box, target: Box, offset: float, lane: int = 0) -> str:
    """An edge's path: an arc for calls of one turn, a curve between neighbouring columns, and for an edge
    that skips columns a detour along the corridor below both rows, so it never passes behind a node."""
    x1, y1 = source.x + NODE_W, source.y + NODE_H / 2 + offset
    if source.column == target.column:  # calls of one turn: an arc on the right of the column
        x2, y2 = target.x + NODE_W, target.y + NODE_H / 2 + offset
        bulge = x1 + 34 + abs(offset) * 2 + abs(target.row - source.row) * 6
        return f"M{_n(x1)},{_n(y1)} C{_n(bulge)},{_n(y1)} {_n(bulge)},{_n(y2)} {_n(x2 + 2)},{_n(y2)}"
    x2, y2 = target.x - 2, target.y + NODE_H / 2 + offset
    if abs(target.column - source.column) == 1:
        pull = max(48.0, abs(x2 - x1) / 2)
        return f"M{_n(x1)},{_n(y1)} C{_n(x1 + pull)},{_n(y1)} {_n(x2 - pull)},{_n(y2)} {_n(x2)},{_n(y2)}"
    corridor = max(source.y, target.y) + NODE_H + 8 + (lane % _LANES) * 4.5
    h = COL_GAP / 4
    return (
        f"M{_n(x1)},{_n(y1)} C{_n(x1 + h)},{_n(y1)} {_n(x1 + h)},{_n(corridor)} {_n(x1 + 2 * h)},{_n(corridor)} "
        f"L{_n(x2 - 2 * h)},{_n(corridor)} C{_n(x2 - h)},{_n(corridor)} {_n(x2 - h)},{_n(y2)} {_n(x2)},{_n(y2)}"
    )


def _edge_title(source: str, target: str, data: dict[str, Any], escaping: bool) -> str:
    kind = data.get("kind", "")
    evidence = {name: value for name, value in data.items() if name != "kind"}
    head = f"{kind} edge {source} → {target}" + (" (symlink escape)" if escaping else "")
    explanation = evidence.pop("explanation", None)
    lines = [head] + ([str(explanation)] if explanation else [])
    # The evidence as "name: value" pairs, empty ones left out: a graph can hold thousands of edges.
    pairs = [f"{name}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)}"
             for name, value in sorted(evidence.items())
             if value not in ("", None) and not (explanation and isinstance(value, str) and value in str(explanation))]
    if pairs:
        lines.append("; ".join(pairs))
    return "\n".join(lines)


def _edge_css() -> str:
    looks = {kind: (colour, style, 2.2 if kind == "divergence" else 1.4) for kind, (colour, style) in EDGE_STYLES.items()}
    looks["escape"] = (ESCAPE_COLOUR, "dashed", 3.2)
    rules = ["svg .edge path.hit { fill: none; stroke: transparent; stroke-width: 10; }",
             "svg .edge path.line { fill: none; stroke: #000; stroke-width: 1.4; marker-end: url(#arrow-data); }"]
    for look, (colour, style, width) in looks.items():  # escape last: it outranks the kind's look
        dash = " stroke-dasharray: 6 4;" if style == "dashed" else ""
        selector = "svg .edge.escape" if look == "escape" else f"svg .edge-{look}"
        rules.append(f"{selector} path.line {{ stroke: {colour}; stroke-width: {width};{dash}"
                     f" marker-end: url(#arrow-{look}); }}")
    return "\n".join(rules) + "\n"


def _node_css() -> str:
    rules = [f"svg .node rect.body {{ fill: {WORLD_COLOURS[0]}; stroke: {WORLD_COLOURS[1]}; stroke-width: 1.5; }}"]
    rules += [f"svg .node.cls-{cls} rect.body {{ fill: {fill}; stroke: {stroke}; }}"
              for cls, (fill, stroke) in CLASS_COLOURS.items()]
    rules += ["svg .node.divergent rect.body { stroke-width: 3; }",
              "svg .node.critical rect.body, svg .node.escape rect.body { stroke-width: 4; }",
              "svg .node.counterfactual rect.body { stroke-dasharray: 7 3; }"]
    return "\n".join(rules) + "\n"


# How edges and nodes look, by class; the page that holds a graph carries it once.
EDGE_CSS = _edge_css() + _node_css()


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
            # How an edge looks comes from its classes (EDGE_CSS): a page with thousands of edges repeats no style.
            classes = " ".join(["edge", f"edge-{kind}", *(["escape"] if escaping else [])])
            out.append(
                f'<g class="{_a(classes)}" data-kind="{_a(kind)}" data-source="{_a(source)}" data-target="{_a(target)}">'
                f"<title>{escape_text(_edge_title(source, target, data, escaping))}</title>"
                f'<path class="line" d="{path}"/></g>'  # its hit area: the page's script
            )
    out.append("</g>")

    out.append('<g class="nodes">')
    for node, box in boxes.items():
        out.append(_node_svg(node, dict(graph.nodes[node]), box, calls.get(node), node in escaping_calls))
    out.append("</g></svg>")
    return "\n".join(out)
