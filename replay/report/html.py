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
from typing import Callable, Iterable, NamedTuple, Sequence

from .. import __version__
from ..analysis import Analysis, class_counts
from ..engine import CallReplay
from ..scoring import PairClass
from ..verdicts import FINDINGS, RunVerdict, decisive_state
from .atomic import write_atomic
from .cells import PAIR_COLUMNS, class_cell, evidence_lines, outcome_cell, plural, preview, recorded_as_stub
from .export import CLASS_COLOURS, EDGE_STYLES
from .svg import EDGE_CSS, ESCAPE_COLOUR, escape_edges, escape_text, graph_svg
from .visible import visible

__all__ = ["IndexEntry", "PageNav", "index_html", "html_page", "lead_parts", "lead_text", "nav_html", "page_name",
           "trajectory_html", "with_nav", "write_html_dir"]

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
section.verdict { border-left: 6px solid #5b6472; padding: 2px 12px; } section.verdict.flagged { border-left-color: #b42318; }
.judgements { display: flex; flex-wrap: wrap; gap: 10px; } .judgement { flex: 1 1 220px; border: 1px solid #d8dde5; padding: 0 10px; }
.judgement.disagrees { border-color: #b42318; } .judgement h3 { font-size: 12px; color: #5b6472; } .finding-word { font-weight: 700; }
code.condition { white-space: pre-wrap; word-break: break-word; }
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


# The three judgements of a run (see :mod:`..verdicts`), by the names a disagreement gives them.
JUDGEMENTS = {"recorded": "the recorded verdict", "check": "the benchmark's check", "effects": "the effects committed"}
_DIFF_LINES = 80  # a drift diff longer than this is cut (the run's line in results.jsonl has the call)


def _t(value: object) -> str:
    """Recorded (or recorded-derived) text for an element: one line, controls and bidi marks made visible,
    then HTML-escaped."""
    return escape_text(visible(value))


def _shown_checks(run: Analysis) -> dict[str, dict]:
    """The benchmark's checks replayed for this run, by name: every check a bridge ran, else the verdict's."""
    if run.checks:
        return {name: dict(entry) for name, entry in run.checks.items() if isinstance(entry, dict)}
    check = run.verdict.check if run.verdict is not None else None
    return {check["name"]: dict(check)} if check else {}


def _disagreeing(verdict: RunVerdict, checks: dict[str, dict]) -> list[str]:
    """The judgements some disagreement names, in the order recorded, check, effects; a replayed check that
    departs from its recorded result names the recorded verdict only when that check judges the harm."""
    harm_departs = any(entry.get("judges") == "harm" and not entry.get("agree", True) for entry in checks.values())
    named = set()
    for item in verdict.disagreements:
        if set(item.between) == {"recorded", "check"} and not harm_departs:
            named.add("check")
        else:
            named.update(item.between)
    return [name for name in JUDGEMENTS if name in named]


def _which_disagree(verdict: RunVerdict, checks: dict[str, dict], run: Analysis | None = None) -> str:
    """Which judgements disagree, in words: a replayed check that departs from its recorded result is named
    (``the recorded utility check and its replay disagree``), as are the judgements of every other
    disagreement; an unscoreable run names the calls whose contexts cannot be compared, an incomplete one
    says the benchmark recorded no verdict."""
    phrases: list[str] = []
    if verdict.finding == "incomplete":
        phrases.append("the benchmark cut the run short and recorded no verdict")
    if verdict.finding == "unscoreable" and run is not None:
        cannot = [f"{call.key} ({call.pair.reason.value if call.pair.reason else 'unscoreable'})"
                  for call in run.replay.calls if call.pair.cls.value == "unscoreable"][:3]
        if cannot:
            phrases.append("the two contexts of " + ", ".join(cannot) + " cannot be compared")
    departing = [name for name, entry in sorted(checks.items()) if not entry.get("agree", True)]
    for item in verdict.disagreements:
        if set(item.between) == {"recorded", "check"} and departing:
            phrase = f"the recorded {' and '.join(departing)} check{'s' if len(departing) > 1 else ''} and the replay disagree"
        else:
            phrase = f"{JUDGEMENTS.get(item.between[0], item.between[0])} and {JUDGEMENTS.get(item.between[1], item.between[1])} disagree"
        if phrase not in phrases:
            phrases.append(phrase)
    return "; ".join(phrases) or "every judgement agrees"


def _check_words(name: str, entry: dict) -> str:
    if entry.get("agree", True):
        return f"{name} check replayed {entry.get('replayed')}, as recorded"
    return f"{name} check replayed {entry.get('replayed')}, recorded {entry.get('recorded')} ({entry.get('cause') or 'differs'})"


def _effects_words(verdict: RunVerdict) -> str:
    effects = verdict.effects
    decisive = verdict.decisive or {}
    if not effects.get("judged"):
        return "no rule for this run"
    if effects.get("harm"):
        return f"harm committed ({decisive.get('call')} {decisive.get('tool')})"
    if decisive:
        return f"harm proposed ({decisive.get('call')} {decisive.get('tool')}), not committed"
    return "no committed call matched a rule"


def lead_parts(run: Analysis) -> dict[str, str] | None:
    """The pieces of a run's lead line, as plain text (each report marks them up its own way), or None for a
    run without a verdict: ``finding``, ``meaning`` (from :data:`..verdicts.FINDINGS`), ``judgements`` (which
    disagree, or that they agree), ``decisive`` (the call and its rule), ``condition`` (the rule as written),
    ``check`` (the benchmark's own result replayed) and ``effects``."""
    verdict = run.verdict
    if verdict is None:
        return None
    judgements = _which_disagree(verdict, _shown_checks(run), run)
    decisive = verdict.decisive
    decisive_text = condition = ""
    if decisive:
        state = decisive_state(decisive)
        decisive_text = f"decisive call {decisive['call']} {decisive.get('tool')} ({state}), rule {decisive.get('rule')}"
        condition = " ".join(str(decisive.get("condition") or "").split())  # on one line: the page shows it as written
    checks = _shown_checks(run)
    harm = verdict.check["name"] if verdict.check else None
    shown = [name for name, entry in checks.items() if name == harm or not entry.get("agree", True)]
    check_text = " · ".join(_check_words(name, entry) for name, entry in sorted(checks.items())
                            if name in shown or len(checks) == 1) or (
        "no check of the benchmark replayed" if not checks else
        " · ".join(_check_words(name, entry) for name, entry in sorted(checks.items())))
    return {"finding": verdict.finding, "meaning": FINDINGS.get(verdict.finding, ""), "judgements": judgements,
            "decisive": decisive_text, "condition": condition, "check": check_text,
            "effects": _effects_words(verdict)}


def lead_text(run: Analysis, text: Callable[[str], str] = str, code: Callable[[str], str] = str,
              word: Callable[[str], str] | None = None) -> str | None:
    """The run's lead line, each piece marked up for its medium by ``text``, ``code`` or (the finding)
    ``word``; by default plain text, recorded text left as is for the caller to escape."""
    parts = lead_parts(run)
    if parts is None:
        return None
    line = f"{(word or code)(parts['finding'])}: {text(parts['judgements'])}"
    if parts["decisive"]:
        line += f" · {text(parts['decisive'])}" + (f": {code(parts['condition'])}" if parts["condition"] else "")
    else:
        line += f" · {text(parts['effects'])}"
    return line + f" · {text(parts['check'])}"


def _between(sides: Sequence[str]) -> str:
    if set(sides) == {"recorded", "check"}:
        return "the recorded check vs its replay"
    return " vs ".join(JUDGEMENTS.get(side, side) for side in sides)


def _call_link(key: str | None) -> str:
    if not key:
        return ""
    return f'<a class="mono" href="#{escape("call-" + key, quote=True)}">{_t(key)}</a>'


# Only pages that show a diff carry its rules.
_DIFF_CSS = """
pre.diff { white-space: pre-wrap; word-break: break-word; max-height: 320px; overflow: auto; background: #f8f9fb;
           border: 1px solid #e3e7ee; padding: 6px; font-size: 12.5px; }
pre.diff span { display: block; } pre.diff .del { background: #fde7e7; } pre.diff .add { background: #e3f4e6; }
pre.diff .hunk { color: #2563a8; } pre.diff .file { color: #5b6472; }
"""


def _diff_html(lines: Sequence[str]) -> str:
    kinds = []
    for line in lines[:_DIFF_LINES]:
        kind = ("file" if line.startswith(("---", "+++")) else "hunk" if line.startswith("@@") else
                "del" if line.startswith("-") else "add" if line.startswith("+") else "ctx")
        kinds.append(f'<span class="{kind}">{_t(line) or " "}</span>')
    more = len(lines) - _DIFF_LINES
    if more > 0:
        kinds.append(f'<span class="file">… {plural(more, "more line")}</span>')
    return '<pre class="diff">' + "".join(kinds) + "</pre>"


def _check_item(name: str, entry: dict) -> str:
    agree = entry.get("agree", True)
    judges = f" <span class=\"sub\">(judges {_t(entry['judges'])})</span>" if entry.get("judges") else ""
    verdict = '<span class="agree">as recorded</span>' if agree else '<span class="disagree">differs from the recording</span>'
    return (f'<li class="check check-{escape(name, quote=True)}"><span class="mono">{_t(name)}</span>{judges}: '
            f"recorded <span class=\"mono\">{_t(entry.get('recorded'))}</span> → replayed "
            f"<span class=\"mono\">{_t(entry.get('replayed'))}</span> · {verdict}</li>")


def _departure(name: str, entry: dict, said: Sequence[str] = ()) -> str:
    """Why a replayed check disagrees with the recorded one: its cause, the call, the diff of the outputs."""
    cause = entry.get("cause") or ("drift" if entry.get("first_departure") else "check_changed")
    head = (f'<p><span class="mono">{_t(name)}</span> check: <span class="finding-word">{_t(cause)}</span>'
            + (f" — {_t(FINDINGS[cause])}" if cause in FINDINGS else "")
            + (f" · first call that answers differently: {_call_link(entry['first_departure'])}"
               if entry.get("first_departure") else "") + "</p>")
    explanation = entry.get("explanation")
    explanation = (f'<p class="sub">{_t(explanation)}</p>'
                   if explanation and not any(explanation in sentence for sentence in said) else "")
    diff = entry.get("diff") or []
    return f'<div class="check-departure">{head}{explanation}{_diff_html(diff) if diff else ""}</div>'


def _verdict_block(run: Analysis) -> str:
    """The page's lead: the finding and its meaning, the three judgements side by side, every disagreement
    with a link to its call, the decisive call with its rule as written, and why a replayed check departs."""
    verdict, parts = run.verdict, lead_parts(run)
    if verdict is None or parts is None:
        return ""
    checks = _shown_checks(run)
    sides = set(_disagreeing(verdict, checks))
    recorded = verdict.recorded
    lead = (f'<p class="lead"><span class="finding-word">{_t(parts["finding"])}</span>: {_t(parts["judgements"])}'
            + (f" · {_t(parts['decisive'])}: <code class=\"condition\">{_t(parts['condition'])}</code>"
               if parts["decisive"] and parts["condition"] else f" · {_t(parts['decisive'])}" if parts["decisive"]
               else f" · {_t(parts['effects'])}")
            + (f" · {_t(parts['check'])}" if checks else "") + "</p>")
    meaning = f'<p class="meaning">{_t(parts["meaning"])}</p>' if parts["meaning"] else ""

    def column(side: str, body: str) -> str:
        mark = " disagrees" if side in sides else ""
        return f'<div class="judgement judgement-{side}{mark}"><h3>{escape(JUDGEMENTS[side])}</h3>{body}</div>'

    kind = str(recorded.get("kind") or "unknown").replace("_", "-")
    recorded_body = (f'<div class="says mono">{_t(recorded.get("label") or "no verdict")}</div>'
                     f'<div class="sub">{escape(kind)}'
                     + (f" · says {_t(recorded['says'])}" if recorded.get("says") else "") + "</div>")
    check_body = ("<ul>" + "".join(_check_item(name, entry) for name, entry in sorted(checks.items())) + "</ul>"
                  if checks else '<div class="sub">no check of the benchmark replayed for this run</div>')
    if run.drift and run.drift.get("calls"):
        calls = run.drift["calls"]
        check_body += (f'<div class="sub">{plural(calls, "call")} answer{"s" if calls == 1 else ""} differently today'
                       f' than in the recording; first {_call_link(run.drift.get("first"))}</div>')
    effects = verdict.effects
    effects_body = f'<div class="says">{_t(parts["effects"])}</div>'
    if effects.get("undetermined"):
        effects_body += ('<div class="sub">commit not judged: '
                         + ", ".join(_call_link(key) for key in effects["undetermined"]) + "</div>")
    judgements = ('<div class="judgements">' + column("recorded", recorded_body)
                  + (column("check", check_body) if checks or run.drift else "")
                  + column("effects", effects_body) + "</div>")
    disagreements = ""
    if verdict.disagreements:
        disagreements = '<ul class="disagreements">' + "".join(
            f'<li class="disagreement" data-kind="{escape(item.kind, quote=True)}"><span class="finding-word">{_t(item.kind)}</span>'
            f" ({escape(_between(item.between))}): {_t(item.sentence)}"
            + (f" · {_call_link(item.call)}" if item.call else "") + "</li>"
            for item in verdict.disagreements) + "</ul>"
    decisive = ""
    if verdict.decisive:
        d = verdict.decisive
        state = decisive_state(d)
        rows = [("decisive call", f"{_call_link(d.get('call'))} <span class=\"mono\">{_t(d.get('tool'))}</span> · "
                                  f"{escape(state)}" + (f" · {_pill(str(d['class']))}" if d.get("class") else "")),
                ("rule", f'<span class="mono">{_t(d.get("rule"))}</span>')]
        if d.get("condition"):
            rows.append(("condition", '<code class="condition">' + "\n".join(
                _t(line) for line in str(d["condition"]).strip().splitlines()) + "</code>"))
        if d.get("source"):
            rows.append(("where the rule comes from", _t(d["source"])))
        decisive = '<dl class="summary decisive">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"
    said = [item.sentence for item in verdict.disagreements]
    departures = "".join(_departure(name, entry, said) for name, entry in sorted(checks.items()) if not entry.get("agree", True))
    flagged = " flagged" if verdict.flagged else ""
    return (f'<section class="verdict finding-{escape(verdict.finding, quote=True)}{flagged}" id="verdict">'
            f"{lead}{meaning}{judgements}{disagreements}{decisive}{departures}</section>")


def _summary(run: Analysis) -> str:
    result = run.replay
    trajectory = result.trajectory
    revalidation = result.revalidation
    rows = [
        ("principal", escape(trajectory.principal)),
        ("re-validated", _pill(revalidation.revalidated.value)),
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
    verdict = _verdict_block(run)
    body = (
        (nav_html(nav) + "\n" if nav is not None else "")
        + f"<h1>{escape(name)} · trajectory <span class=\"mono\">{escape(result.trajectory.id)}</span></h1>\n"
        f"{description}{verdict}\n{_summary(run)}\n"
        f"<h2>Causal graph</h2>\n{_legend()}\n"
        f'<div class="graph-wrap">{graph_svg(run.graph, result, run.findings)}</div>\n'
        f"<h2>Calls</h2>\n{_pair_table(run)}\n"
        f"<h2>Findings</h2>\n{_findings(run)}"
    )
    return html_page(f"litmus-replay · {title}", body, css=_DIFF_CSS if 'class="diff"' in verdict else "")


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
