"""The HTML report: one self-contained page per trajectory, and an index page for a run.

A page holds its CSS and its few lines of JavaScript inline and loads nothing: its Content Security
Policy forbids every external fetch and every script but its own (by hash), so a page can be mailed or
archived as one file, and recorded content that escaped escaping still could not run. Everything
recorded is escaped with :func:`html.escape` all the same: recorded content is hostile.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import re
from html import escape
from pathlib import Path
from typing import Iterable, NamedTuple, Sequence

from .. import __version__
from ..analysis import Analysis, class_counts
from ..engine import CallReplay
from ..scoring import PairClass
from .atomic import write_atomic
from .cells import PAIR_COLUMNS, class_cell, evidence_lines, outcome_cell, plural, preview, recorded_as_stub
from .export import CLASS_COLOURS, EDGE_STYLES
from .svg import EDGE_CSS, ESCAPE_COLOUR, escape_edges, escape_text, graph_svg

__all__ = ["IndexEntry", "PageNav", "index_html", "html_page", "nav_html", "page_name", "trajectory_html", "with_nav",
           "write_html_dir"]

# Highlights a node's edges while the pointer is on it; the only script a page carries. It also lays a
# wide transparent twin under each edge's line, so a thin edge is easy to point at: drawn here rather
# than written into the page, since the twins would be a sixth of a batch's pages.
_SCRIPT = """
(function () {
  var svg = document.querySelector("svg.causal-graph");
  if (!svg) { return; }
  var edges = Array.prototype.slice.call(svg.querySelectorAll("g.edge"));
  edges.forEach(function (edge) {
    var line = edge.querySelector("path.line");
    if (!line) { return; }
    var hit = line.cloneNode(false);
    hit.setAttribute("class", "hit");
    edge.insertBefore(hit, line);
  });
  Array.prototype.forEach.call(svg.querySelectorAll("g.node"), function (node) {
    var key = node.getAttribute("data-key");
    node.addEventListener("mouseenter", function () {
      svg.classList.add("focus");
      node.classList.add("lit");
      edges.forEach(function (edge) {
        if (edge.getAttribute("data-source") === key || edge.getAttribute("data-target") === key) {
          edge.classList.add("lit");
        }
      });
    });
    node.addEventListener("mouseleave", function () {
      svg.classList.remove("focus");
      Array.prototype.forEach.call(svg.querySelectorAll(".lit"), function (el) { el.classList.remove("lit"); });
    });
  });
})();
"""


@functools.lru_cache(maxsize=64)  # a page's script is one of a few
def content_policy(script: str) -> str:
    """The page's Content Security Policy: nothing external, and no script but ``script`` (by hash)."""
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return (
        "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )

_CLASS_CSS = "\n".join(
    f".pc-{name} {{ background: {fill}; border-color: {stroke}; color: #1d2433; }}"
    for name, (fill, stroke) in CLASS_COLOURS.items()
)
_CSS = """
:root { color-scheme: light; }
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: #1d2433; margin: 24px 32px; background: #fbfcfd; }
h1 { font-size: 20px; margin: 0 0 4px; } h2 { font-size: 16px; margin: 28px 0 8px; }
.sub { color: #5b6472; margin: 0 0 16px; }
dl.summary { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; margin: 0; }
dl.summary dt { color: #5b6472; } dl.summary dd { margin: 0; }
.pc { display: inline-block; border: 1px solid; border-radius: 10px; padding: 0 8px; font-size: 12px; white-space: nowrap; }
.problems { color: #b42318; font-weight: 600; } .met { color: #2f7d4a; }
.legend { display: flex; flex-wrap: wrap; gap: 6px 16px; align-items: center; margin: 6px 0 10px; font-size: 12px; }
.legend svg { vertical-align: middle; }
.graph-wrap { overflow: auto; border: 1px solid #d8dde5; border-radius: 8px; background: #fff; max-height: 80vh; }
svg.causal-graph { display: block; font-family: inherit; }
svg .turn-label { font-size: 12px; fill: #5b6472; font-weight: 600; }
svg .node text { font-size: 12px; fill: #1d2433; }
svg .node text.key { font-weight: 700; } svg .node text.tool { font-family: ui-monospace, Menlo, Consolas, monospace; }
svg .node text.cls, svg .node text.status { font-size: 10.5px; fill: #3b4252; }
svg .badge text { font-size: 9.5px; fill: #fff; font-weight: 700; letter-spacing: .3px; }
svg .node:hover rect.body, svg .node.lit rect.body { filter: brightness(0.94); }
svg .edge:hover path.line, svg .edge.lit path.line { stroke-width: 3.2; }
svg.focus .edge:not(.lit) { opacity: .15; }
table { border-collapse: collapse; width: 100%; background: #fff; }
th, td { border: 1px solid #d8dde5; padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #eef1f5; font-weight: 600; }
td.mono, .mono, table.pairs td:nth-child(2), table.pairs td:nth-child(3) { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12.5px; }
td.evidence ul { margin: 0; padding-left: 16px; }
table.pairs td:not(.evidence) { white-space: nowrap; }
tr:target { outline: 2px solid #2563a8; }
details pre { white-space: pre-wrap; word-break: break-word; max-height: 320px; overflow: auto; background: #f4f6f9;
              padding: 6px; margin: 4px 0; }
ul.findings li { margin: 4px 0; } .sev { font-weight: 700; text-transform: uppercase; font-size: 11px; }
.sev-high { color: #b42318; } .sev-warning { color: #a86b00; } .sev-info { color: #5b6472; }
footer { margin-top: 28px; color: #8a93a3; font-size: 12px; }
nav.run-nav { display: flex; gap: 6px 18px; flex-wrap: wrap; margin: 0 0 12px; font-size: 13px; }
nav.run-nav .none { color: #8a93a3; }
""" + EDGE_CSS


@functools.lru_cache(maxsize=64)  # every page of a kind carries the same style sheet
def compact_css(css: str) -> str:
    """CSS without the whitespace it does not need: every page carries its own."""
    return re.sub(r"\s*([{};,>:])\s*", r"\1", re.sub(r"\s+", " ", css)).strip()


def html_page(title: str, body: str, *, script: str = _SCRIPT, css: str = "") -> str:
    """A whole self-contained page around ``body``, carrying ``script`` as its only script."""
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{escape(content_policy(script))}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        '<meta name="referrer" content="no-referrer">\n'
        f"<title>{escape(title)}</title>\n<style>{compact_css(_CSS + _CLASS_CSS + css)}</style>\n</head>\n<body>\n{body}\n"
        f'<footer>litmus-replay {escape(__version__)} · report format 1</footer>\n'
        f"<script>{script}</script>\n</body>\n</html>\n"
    )





class PageNav(NamedTuple):
    """Where a run's page leads: back to the index, and to the flagged runs before and after it.

    ``previous`` and ``following`` are ``(href, run id)`` or None.
    """

    index: str
    previous: tuple[str, str] | None = None
    following: tuple[str, str] | None = None


_NAV_START, _NAV_END = '<nav class="run-nav">', "</nav>"


def nav_html(nav: PageNav) -> str:
    def link(target: tuple[str, str] | None, rel: str, words: str) -> str:
        if target is None:
            return f'<span class="none">no {words}</span>'
        href, run_id = target
        return f'<a rel="{rel}" href="{escape(href, quote=True)}">{words}: <span class="mono">{escape(run_id)}</span></a>'

    return (
        f'{_NAV_START}<a rel="index" href="{escape(nav.index, quote=True)}">index of the batch</a>'
        f'{link(nav.previous, "prev", "previous flagged run")}{link(nav.following, "next", "next flagged run")}{_NAV_END}'
    )


def with_nav(page_text: str, nav: PageNav) -> str:
    """``page_text`` with its navigation replaced by ``nav`` (the first ``nav.run-nav`` on the page is its
    own: recorded content is escaped, so it cannot open one)."""
    start = page_text.find(_NAV_START)
    if start < 0:
        raise ValueError("the page has no run navigation")
    end = page_text.index(_NAV_END, start) + len(_NAV_END)
    return page_text[:start] + nav_html(nav) + page_text[end:]


def _pill(cls: str, text: str | None = None) -> str:
    return f'<span class="pc pc-{escape(cls, quote=True)}">{escape(text or cls)}</span>'


def _legend() -> str:
    items = [_pill(cls.value) for cls in PairClass]
    for kind, (colour, style) in [*EDGE_STYLES.items(), ("escape", (ESCAPE_COLOUR, "dashed"))]:
        dash = ' stroke-dasharray="6 4"' if style == "dashed" else ""
        width = 3 if kind in ("divergence", "escape") else 1.6
        items.append(
            f'<span><svg width="34" height="10" aria-hidden="true"><line x1="1" y1="5" x2="33" y2="5" stroke="{colour}"'
            f' stroke-width="{width}"{dash}/></svg> {escape(kind)}</span>'
        )
    items.append("<span>badges: CRITICAL, DIVERGENT, COUNTERFACTUAL, ESCAPE · hover for arguments and outputs</span>")
    return '<div class="legend">' + "".join(items) + "</div>"


def _call_details(call: CallReplay) -> str:
    parts = [("arguments", call.call.arguments)]
    if call.call.result is not None:
        parts.append(("recorded", "ok, the same output as the stub" if recorded_as_stub(call)
                      else call.call.result.model_dump()))
    parts.append(("stub output", call.stub.output))
    if call.real is not None:
        same = call.real.output == call.stub.output
        parts.append(("real output", "the same as the stub" if same else call.real.output))
        if call.real.error:
            parts.append(("real error", call.real.error))
    body = "".join(f"<div>{escape(name)}</div><pre>{escape_text(preview(value, 4000))}</pre>" for name, value in parts)
    return f"<details><summary>arguments &amp; outputs</summary>{body}</details>"


def _pair_table(run: Analysis) -> str:
    head = "".join(f"<th>{escape(column)}</th>" for column in PAIR_COLUMNS)
    rows = []
    for call in run.replay.calls:
        evidence = "".join(f"<li>{escape(line)}</li>" for line in evidence_lines(call))
        commit = call.commit.policy_verdict if call.commit else "-"
        rows.append(
            f'<tr id="{escape("call-" + call.key, quote=True)}" class="pair pc-row-{escape(call.pair.cls.value, quote=True)}">'
            f"<td>{call.turn}</td><td>{escape(call.key)}</td><td>{escape(call.call.tool)}</td>"  # monospace by column
            f"<td>{escape(outcome_cell(call.stub))}</td><td>{escape(outcome_cell(call.real))}</td>"
            f"<td>{escape(call.proposal.policy_verdict)}</td><td>{escape(commit)}</td>"
            f"<td>{_pill(call.pair.cls.value, class_cell(call))}</td>"
            f'<td class="evidence"><ul>{evidence}</ul>{_call_details(call)}</td></tr>'
        )
    return f'<table class="pairs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _findings(run: Analysis) -> str:
    if not run.findings:
        return '<p class="sub">No findings.</p>'
    escapes, _ = escape_edges(run.graph, run.findings)
    items = []
    for finding in run.findings:
        links = ", ".join(
            f'<a class="mono" href="#{escape("call-" + node, quote=True)}">{escape(node)}</a>' for node in finding.nodes
        )
        items.append(
            f'<li class="finding kind-{escape(finding.kind, quote=True)} sev-{escape(finding.severity, quote=True)}"'
            f' data-nodes="{escape(" ".join(finding.nodes), quote=True)}">'
            f'<span class="sev sev-{escape(finding.severity, quote=True)}">{escape(finding.severity)}</span> '
            f'<span class="mono">{escape(finding.kind)}</span>: {escape(finding.sentence)}'
            + (f" <span class=\"sub\">({links})</span>" if links else "")
            + "</li>"
        )
    suffix = "s" if len(escapes) != 1 else ""
    note = f'<p class="sub">{len(escapes)} escape edge{suffix} drawn in purple in the graph.</p>' if escapes else ""
    return f'<ul class="findings">{"".join(items)}</ul>{note}'


def _summary(run: Analysis) -> str:
    result = run.replay
    trajectory = result.trajectory
    revalidation = result.revalidation
    original = trajectory.original_verdict.label if trajectory.original_verdict else "none"
    rows = [
        ("principal", escape(trajectory.principal)),
        ("original verdict", escape(original)),
        ("re-validated", _pill(revalidation.revalidated.value) + f" · {escape(revalidation.finding)}"),
    ]
    if trajectory.incomplete:
        rows.append(("cut short", '<span class="problems">' + escape(trajectory.incomplete)
                     + "</span> (recorded by the benchmark: the calls are only those made before)"))
    if revalidation.critical:
        rows.append(("critical calls", ", ".join(
            f'<a class="mono" href="#{escape("call-" + key, quote=True)}">{escape(key)}</a> {_pill(cls.value)}'
            for key, cls in revalidation.critical.items()
        )))
    counts = {cls: n for cls, n in class_counts([run]).items() if n}
    rows.append(("calls", f"{len(result.calls)} · " + " ".join(_pill(cls, f"{cls} {n}") for cls, n in counts.items())))
    if run.problems is not None:
        rows.append(("expectations", '<span class="problems">FAILED: ' + escape("; ".join(run.problems)) + "</span>"
                     if run.problems else '<span class="met">met</span>'))
    return '<dl class="summary" id="summary">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def trajectory_html(run: Analysis, nav: PageNav | None = None) -> str:
    """One self-contained page: summary, the causal graph by turn, the pair table and the findings;
    with ``nav``, links to the batch's index and the neighbouring flagged runs above them."""
    result = run.replay
    name = result.scenario or result.trajectory.id
    title = f"{name} · {result.trajectory.id}"
    description = ""
    task = result.trajectory.task
    if task:
        description = f'<p class="sub">task: {escape(task)}</p>'
    body = (
        (nav_html(nav) + "\n" if nav is not None else "")
        + f"<h1>{escape(name)} · trajectory <span class=\"mono\">{escape(result.trajectory.id)}</span></h1>\n"
        f"{description}{_summary(run)}\n"
        f"<h2>Causal graph</h2>\n{_legend()}\n"
        f'<div class="graph-wrap">{graph_svg(run.graph, result, run.findings)}</div>\n'
        f"<h2>Calls</h2>\n{_pair_table(run)}\n"
        f"<h2>Findings</h2>\n{_findings(run)}"
    )
    return html_page(f"litmus-replay · {title}", body)


class IndexEntry(NamedTuple):
    """A page written for one trajectory: its address relative to the index, and what it shows."""

    href: str
    run: Analysis


def index_html(entries: Iterable[IndexEntry], errors: Sequence[str] = ()) -> str:
    """The run's index: one row per trajectory page, the class counts, and the input errors."""
    entries = list(entries)
    counts = class_counts(entry.run for entry in entries)
    rows = []
    for entry in entries:
        result = entry.run.replay
        original = result.trajectory.original_verdict.label if result.trajectory.original_verdict else "none"
        high = sum(1 for finding in entry.run.findings if finding.severity == "high")
        problems = entry.run.problems
        expectations = (
            "" if problems is None else
            f'<span class="problems">FAILED: {escape("; ".join(problems))}</span>' if problems else '<span class="met">met</span>'
        )
        rows.append(
            f'<tr><td><a href="{escape(entry.href, quote=True)}">{escape(result.scenario or "")}</a></td>'
            f'<td class="mono"><a href="{escape(entry.href, quote=True)}">{escape(result.trajectory.id)}</a></td>'
            f"<td>{escape(result.trajectory.principal)}</td><td>{escape(original)}</td>"
            f"<td>{_pill(result.revalidation.revalidated.value)}</td><td>{escape(result.revalidation.finding)}</td>"
            f"<td>{len(result.calls)}</td><td>{len(entry.run.findings)} ({high} high)</td><td>{expectations}</td></tr>"
        )
    head = "".join(f"<th>{h}</th>" for h in ("scenario", "trajectory", "principal", "original verdict", "re-validated",
                                             "finding", "calls", "findings", "expectations"))
    total = sum(counts.values())
    summary = f"{plural(len(entries), 'trajectory')} · {plural(total, 'call')} · " + " ".join(
        _pill(cls, f"{cls} {n}") for cls, n in counts.items() if n
    )
    error_list = ""
    if errors:
        error_list = "<h2>Input errors</h2><ul>" + "".join(f'<li class="mono">{escape(e)}</li>' for e in errors) + "</ul>"
    body = (
        f"<h1>litmus-replay run</h1>\n<p class=\"sub\">{summary}</p>\n"
        f'<table class="runs"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>\n{error_list}'
    )
    return html_page("litmus-replay · run", body)


_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def page_name(run: Analysis, taken: set[str] | None = None) -> str:
    """A file name for a trajectory's page, from its scenario and trajectory id: only ``[A-Za-z0-9._-]``
    (ids are recorded content: no separators, no leading dot), unique within ``taken``."""
    result = run.replay
    parts = [result.scenario or "trajectory", result.trajectory.id]
    stem = "--".join(_UNSAFE_NAME.sub("-", part).strip("-.") or "x" for part in parts)[:120]
    name, number = f"{stem}.html", 2
    while taken is not None and (name in taken or name == "index.html"):
        name, number = f"{stem}-{number}.html", number + 1
    if taken is not None:
        taken.add(name)
    return name


def write_html_dir(runs: Iterable[Analysis], directory: str | Path, errors: Sequence[str] = ()) -> list[Path]:
    """One page per trajectory and an ``index.html`` linking them, each written atomically; the paths written."""
    directory = Path(directory)
    taken: set[str] = set()
    entries, written = [], []
    for run in runs:
        name = page_name(run, taken)
        write_atomic(directory / name, trajectory_html(run))
        written.append(directory / name)
        entries.append(IndexEntry(name, run))
    write_atomic(directory / "index.html", index_html(entries, errors))
    written.append(directory / "index.html")
    return written
