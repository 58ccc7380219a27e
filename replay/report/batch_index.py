"""The index of a re-validation batch, built for a person to work through tens of thousands of runs.

It leads with what changed: a chart and the table of original verdicts against re-validated classes,
then the over-penalised, under-penalised and unscoreable runs, each group with its count, then the runs
that could not be re-validated, then the rest. A reader filters by class, finding, task and original
verdict and sorts by any column; the filters live in the address (``#finding=over_penalised``), so a
cell of the table or a bar of the chart is a link to its runs, and a filtered view can be shared. An
address that names a filter or a value the page does not know (``#finding=bogus``) says so in a line
above the runs, with the valid ones, instead of showing nothing.

The runs travel as one JSON document inside the page and its script draws only a window of each group
(more on request), so the page stays quick with 36,679 rows. The page is written in pieces, one row at a
time, so writing it holds no more than one row in memory. Recorded content reaches the page only as JSON
(``<`` escaped) and is put in the DOM as text, never as markup.
"""

from __future__ import annotations

import json
from html import escape
from pathlib import Path
from typing import IO, Any, Iterable, Protocol

from ..scoring import PairClass
from ..verdicts import FINDINGS, FLAGGED
from .atomic import open_atomic
from .cells import plural
from .export import CLASS_COLOURS
from .html import html_page

__all__ = ["FLAGGED_FINDINGS", "GROUPS", "index_group", "write_batch_index"]

# Findings in which two of a run's judgements disagree: these runs get a page by default.
FLAGGED_FINDINGS = FLAGGED

GROUPS: tuple[tuple[str, str], ...] = (
    *((kind, f"{kind.replace('_', ' ').capitalize()}: {FINDINGS[kind]}") for kind in FLAGGED),
    ("not_replayed", "Not re-validated: no world, an input error or a harness error"),
    ("rest", "The rest: the verdict stands, or there was none to check"),
)
COLUMNS = ("run", "task", "original", "class", "finding", "detail", "report", "group")
_STATUS_CLASSES = ("no_tool_calls", "missing_world", "harness_error", "input_error")
# The values a filter knows whatever the batch holds (a finding no run has is valid, and shows no run);
# a task or an original verdict is valid when some run has it.
KNOWN_VALUES = {"class": [*(cls.value for cls in PairClass), *_STATUS_CLASSES], "finding": list(FINDINGS)}
_OTHER_COLOUR = ("#eceff3", "#8a93a3")


class IndexedLine(Protocol):
    """What the index reads of a result line (the batch's ``ResultLine``; stated here, as report modules
    do not import the batch)."""

    run: str
    task: str | None
    original: str | None
    status: str
    revalidated: str | None
    finding: str | None
    error: str | None
    detail: str | None
    report: str | None


def index_group(line: IndexedLine) -> str:
    """Which group of the index a result line belongs to."""
    if line.status not in ("ok", "no_tool_calls"):  # a run without a tool call: its verdict stands
        return "not_replayed"
    return line.finding if line.finding in FLAGGED_FINDINGS else "rest"


def _row(line: IndexedLine) -> list[Any]:
    return [
        line.run,
        line.task or "",
        line.original or "none",
        line.revalidated or line.status or "",
        line.finding or "",
        line.error or line.detail or "",
        line.report or "",
        index_group(line),
    ]


def _json(value: Any) -> str:
    """JSON safe inside a <script> data block: no ``<`` can close it or open a comment."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _filter_href(**filters: str) -> str:
    from urllib.parse import quote

    return "#" + "&".join(f"{key}={quote(value, safe='')}" for key, value in filters.items())


def _table(summary: dict[str, Any]) -> str:
    columns = sorted({col for row in summary["table"].values() for col in row})
    head = "".join(f"<th>{escape(col)}</th>" for col in ["original verdict", *columns])
    rows = []
    for original, cols in summary["table"].items():
        cells = []
        for col in columns:
            count = cols.get(col, 0)
            href = _filter_href(original=original, **{"class": col})
            cells.append(f'<td class="num"><a href="{escape(href, quote=True)}">{count}</a></td>' if count else
                         '<td class="num zero">0</td>')
        rows.append(f"<tr><th scope=\"row\">{escape(original)}</th>{''.join(cells)}</tr>")
    return f'<table class="revalidation"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _chart(summary: dict[str, Any]) -> str:
    """Original verdict against re-validated class: one bar per original verdict, a segment per class."""
    table = summary["table"]
    if not table:
        return ""
    columns = sorted({col for row in table.values() for col in row})
    widest = max(sum(row.values()) for row in table.values()) or 1
    label_w, bar_w, row_h, top = 150, 420, 26, 8
    parts = []
    for number, (original, cols) in enumerate(table.items()):
        y = top + number * row_h
        parts.append(f'<text class="label" x="{label_w - 8}" y="{y + 15}" text-anchor="end">{escape(original)}</text>')
        x = float(label_w)
        for col in columns:
            count = cols.get(col, 0)
            if not count:
                continue
            width = max(2.0, bar_w * count / widest)
            fill, stroke = CLASS_COLOURS.get(col, _OTHER_COLOUR)
            href = escape(_filter_href(original=original, **{"class": col}), quote=True)
            parts.append(
                f'<a href="{href}"><rect class="seg" x="{x:.1f}" y="{y}" width="{width:.1f}" height="18" fill="{fill}"'
                f' stroke="{stroke}"><title>{escape(original)} → {escape(col)}: {count}</title></rect></a>'
            )
            x += width
        parts.append(f'<text class="total" x="{x + 6:.1f}" y="{y + 15}">{sum(cols.values())}</text>')
    legend_y = top + len(table) * row_h + 6
    x = float(label_w)
    for col in columns:
        fill, stroke = CLASS_COLOURS.get(col, _OTHER_COLOUR)
        parts.append(f'<rect x="{x:.1f}" y="{legend_y}" width="12" height="12" fill="{fill}" stroke="{stroke}"/>'
                     f'<text class="legend" x="{x + 16:.1f}" y="{legend_y + 10}">{escape(col)}</text>')
        x += 24 + 6.6 * len(col)
    height = legend_y + 20
    width = max(label_w + bar_w + 60, int(x) + 10)
    return (
        f'<svg class="revalidation-chart" role="img" width="{width}" height="{height}" viewBox="0 0 {width} {height}"'
        ' aria-label="original verdict against re-validated class">' + "".join(parts) + "</svg>"
    )


_STATUSES = ("no_tool_calls", "missing_world", "harness_error", "input_error")


def finding_counts(summary: dict[str, Any]) -> dict[str, int]:
    """Runs per finding (or status, for a run not re-validated), over every original verdict."""
    counts: dict[str, int] = {}
    for row in (summary.get("findings") or {}).values():
        for finding, runs in row.items():
            counts[finding] = counts.get(finding, 0) + runs
    return counts


def _finding_columns(summary: dict[str, Any]) -> list[str]:
    seen = {col for row in (summary.get("findings") or {}).values() for col in row}
    ordered = [kind for kind in (*FLAGGED, *FINDINGS) if kind in seen]
    ordered = list(dict.fromkeys(ordered))
    return ordered + sorted(seen - set(ordered) - set(_STATUSES)) + [s for s in _STATUSES if s in seen]


def _findings_table(summary: dict[str, Any]) -> str:
    """Original verdict (rows) against the run's finding (columns): which judgements disagree, by verdict."""
    table = summary.get("findings") or {}
    if not table:
        return ""
    columns = _finding_columns(summary)
    head = "".join(f'<th class="{"flagged" if col in FLAGGED else ""}">{escape(col)}</th>'
                   for col in columns)
    rows = []
    for original, cols in table.items():
        cells = []
        for col in columns:
            count = cols.get(col, 0)
            key = "class" if col in _STATUSES else "finding"
            href = _filter_href(original=original, **{key: col})
            cells.append(f'<td class="num"><a href="{escape(href, quote=True)}">{count}</a></td>' if count else
                         '<td class="num zero">0</td>')
        rows.append(f"<tr><th scope=\"row\">{escape(original)}</th>{''.join(cells)}</tr>")
    return ('<table class="revalidation findings"><caption>original verdict × finding</caption>'
            f'<thead><tr><th>original verdict</th>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>')


def _agreement(summary: dict[str, Any]) -> str:
    """The replay's agreement with the benchmark's own checks, and the calls that drifted (bridged batches)."""
    checks = summary.get("checks")
    if not checks:
        return ""
    items = []
    for name, rate in (checks.get("agreement") or {}).items():
        disagree = rate["runs"] - rate["agree"]
        items.append(f'<li><span class="mono">{escape(name)}</span>: {rate["agree"]}/{rate["runs"]} runs agree '
                     f'({rate["rate"]:.1%})' + (f" · {disagree} disagree" if disagree else "") + "</li>")
    drift = checks.get("drift") or {}
    counts = finding_counts(summary)
    items.append(f"<li>drift: {plural(drift.get('calls', 0), 'call')} answer differently today than in the recording, "
                 f"in {plural(drift.get('runs', 0), 'run')}; "
                 f'<a href="#finding=drift">{counts.get("drift", 0)} changed a check (drift)</a> · '
                 f'<a href="#finding=check_changed">{counts.get("check_changed", 0)} judged differently with every call as recorded'
                 " (version)</a></li>")
    return ('<div class="agreement" id="agreement"><h2>Agreement with the benchmark\'s own checks, replayed</h2>'
            f'<ul>{"".join(items)}</ul></div>')


def _headline(summary: dict[str, Any]) -> str:
    """The runs and, for each finding in which two judgements disagree, how many (over- and under-penalised
    always), each a link to its runs."""
    counts = finding_counts(summary)
    if "findings" not in summary:  # a summary written before findings were counted
        counts = {"over_penalised": len(summary.get("over_penalised") or ()),
                  "under_penalised": len(summary.get("under_penalised") or ())}
    parts = [plural(summary["runs"], "run")]
    for kind in FLAGGED:
        if counts.get(kind) or kind in ("over_penalised", "under_penalised"):
            parts.append(f'<a href="{escape(_filter_href(finding=kind), quote=True)}" title="{escape(FINDINGS[kind])}">'
                         f'{counts.get(kind, 0)} {escape(kind.replace("_", "-"))}</a>')
    return " · ".join(parts)


_CSS = """
.lead { display: flex; flex-wrap: wrap; gap: 16px 32px; align-items: flex-start; }
svg.revalidation-chart text { font-size: 12px; fill: #1d2433; } svg.revalidation-chart text.total { fill: #5b6472; }
svg.revalidation-chart a:hover rect { filter: brightness(0.9); }
table.revalidation { width: auto; } td.num { text-align: right; } td.zero { color: #b8bfca; }
table.revalidation caption { text-align: left; font-size: 12px; color: #5b6472; padding: 0 0 4px; }
table.findings th.flagged { color: #b42318; }
.agreement h2 { font-size: 15px; margin: 18px 0 4px; } .agreement ul { margin: 0; padding-left: 18px; }
table.runs td:first-child { min-width: 260px; max-width: 380px; overflow-wrap: anywhere; }
table.runs td:nth-child(6) { min-width: 360px; font-size: 12.5px; color: #3b4252; }
.filters { display: flex; flex-wrap: wrap; gap: 8px 16px; align-items: center; margin: 18px 0 6px; padding: 8px 10px;
           background: #eef1f5; border-radius: 8px; position: sticky; top: 0; z-index: 1; }
.filters label { font-size: 12px; color: #5b6472; } .filters select { max-width: 260px; }
section.group h2 .count { display: inline-block; min-width: 22px; padding: 0 7px; margin-left: 6px; border-radius: 10px;
                          background: #1d2433; color: #fff; font-size: 12px; text-align: center; }
section.group.empty { color: #8a93a3; }
table.runs th.sortable { cursor: pointer; user-select: none; } table.runs th[aria-sort=ascending]::after { content: " ▲"; }
table.runs th[aria-sort=descending]::after { content: " ▼"; }
button.more { margin: 6px 0; }
"""

# Draws the groups from the JSON rows; filters and sort are kept in location.hash.
_SCRIPT = r"""
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("runs-data").textContent);
  var C = {}; data.columns.forEach(function (name, i) { C[name] = i; });
  var rows = data.rows, groups = data.groups, known = data.known || {}, WINDOW = 200;
  var FILTERS = ["class", "finding", "task", "original"], OTHER_KEYS = ["sort", "desc"], SHOWN_VALUES = 12;
  var SHOWN = [["run", "run"], ["task", "task"], ["original", "original verdict"], ["class", "re-validated"],
               ["finding", "finding"], ["detail", "detail"]];
  var state = { sort: "", desc: false }, shown = {};
  var root = document.getElementById("groups"), form = document.getElementById("filters");

  function readHash() {
    state = { sort: "", desc: false };
    location.hash.replace(/^#/, "").split("&").forEach(function (part) {
      var at = part.indexOf("=");
      if (at > 0) { state[decodeURIComponent(part.slice(0, at))] = decodeURIComponent(part.slice(at + 1)); }
    });
    state.desc = state.desc === "1";
  }
  function writeHash() {
    var parts = [];
    FILTERS.concat(["sort"]).forEach(function (key) {
      if (state[key]) { parts.push(key + "=" + encodeURIComponent(state[key])); }
    });
    if (state.desc) { parts.push("desc=1"); }
    var hash = parts.length ? "#" + parts.join("&") : "";
    if (location.hash !== hash) { history.replaceState(null, "", hash || location.pathname + location.search); }
  }
  function fillSelects() {
    FILTERS.forEach(function (key) {
      var counts = {}, select = form.elements[key];
      rows.forEach(function (row) { counts[row[C[key]]] = (counts[row[C[key]]] || 0) + 1; });
      Object.keys(counts).sort().forEach(function (value) {
        var option = document.createElement("option");
        option.value = value;
        option.textContent = (value || "(none)") + " (" + counts[value] + ")";
        select.appendChild(option);
      });
      select.addEventListener("change", function () { state[key] = select.value; shown = {}; writeHash(); render(); });
    });
    document.getElementById("clear").addEventListener("click", function () {
      FILTERS.forEach(function (key) { state[key] = ""; }); shown = {}; writeHash(); render();
    });
  }
  function cell(tr, row, name) {
    var td = document.createElement("td"), value = row[C[name]];
    if (name === "run") {
      td.className = "mono";
      if (row[C.report]) {
        var a = document.createElement("a"); a.href = row[C.report]; a.textContent = value; td.appendChild(a);
      } else { td.textContent = value; }
    } else if (name === "class") {
      var pill = document.createElement("span"); pill.className = "pc pc-" + value; pill.textContent = value;
      td.appendChild(pill);
    } else { td.textContent = value; }
    tr.appendChild(td);
  }
  function head(table) {
    var tr = document.createElement("tr");
    SHOWN.forEach(function (pair) {
      var th = document.createElement("th");
      th.textContent = pair[1]; th.className = "sortable"; th.setAttribute("data-sort", pair[0]);
      if (state.sort === pair[0]) { th.setAttribute("aria-sort", state.desc ? "descending" : "ascending"); }
      th.addEventListener("click", function () {
        state.desc = state.sort === pair[0] ? !state.desc : false; state.sort = pair[0]; writeHash(); render();
      });
      tr.appendChild(th);
    });
    var thead = document.createElement("thead"); thead.appendChild(tr); table.appendChild(thead);
  }
  function valuesOf(key) {
    var seen = {};
    (known[key] || []).forEach(function (value) { seen[value] = true; });
    rows.forEach(function (row) { if (row[C[key]]) { seen[row[C[key]]] = true; } });
    return Object.keys(seen).sort();
  }
  // An address naming a filter or a value this page does not know says so, with the valid ones.
  function filterProblems() {
    var problems = [];
    Object.keys(state).forEach(function (key) {
      if (FILTERS.indexOf(key) < 0 && OTHER_KEYS.indexOf(key) < 0) {
        problems.push("unknown filter \u201c" + key + "\u201d in the address; the filters are: " + FILTERS.join(", "));
      }
    });
    FILTERS.forEach(function (key) {
      if (!state[key]) { return; }
      var valid = valuesOf(key);
      if (valid.indexOf(state[key]) < 0) {
        var listed = valid.slice(0, SHOWN_VALUES).join(", ") + (valid.length > SHOWN_VALUES ? ", \u2026 (" + valid.length + " in all)" : "");
        problems.push("unknown value for the filter " + key + ": \u201c" + state[key] + "\u201d; valid values: " + (listed || "none"));
      }
    });
    var box = document.getElementById("filter-problem");
    box.textContent = problems.join(" \u00b7 ");
    box.hidden = !problems.length;
  }
  function render() {
    FILTERS.forEach(function (key) { form.elements[key].value = state[key] || ""; });
    filterProblems();
    var picked = rows.filter(function (row) {
      return FILTERS.every(function (key) { return !state[key] || row[C[key]] === state[key]; });
    });
    if (state.sort && C[state.sort] !== undefined) {
      var at = C[state.sort], sign = state.desc ? -1 : 1;
      picked = picked.map(function (row, i) { return [row, i]; });
      picked.sort(function (a, b) {
        var x = a[0][at], y = b[0][at];
        return x < y ? -sign : x > y ? sign : a[1] - b[1];
      });
      picked = picked.map(function (pair) { return pair[0]; });
    }
    var byGroup = {};
    picked.forEach(function (row) { (byGroup[row[C.group]] = byGroup[row[C.group]] || []).push(row); });
    document.getElementById("matching").textContent = picked.length + " of " + rows.length + " runs";
    var fragment = document.createDocumentFragment();
    groups.forEach(function (group) {
      var key = group[0], members = byGroup[key] || [];
      var section = document.createElement("section");
      section.className = "group" + (members.length ? "" : " empty");
      section.id = "group-" + key; section.setAttribute("data-group", key); section.setAttribute("data-count", members.length);
      var h2 = document.createElement("h2"); h2.textContent = group[1];
      var count = document.createElement("span"); count.className = "count"; count.textContent = members.length;
      h2.appendChild(count); section.appendChild(h2);
      if (members.length) {
        var limit = shown[key] || WINDOW, table = document.createElement("table"), body = document.createElement("tbody");
        table.className = "runs"; head(table);
        members.slice(0, limit).forEach(function (row) {
          var tr = document.createElement("tr"); tr.setAttribute("data-run", row[C.run]);
          SHOWN.forEach(function (pair) { cell(tr, row, pair[0]); });
          body.appendChild(tr);
        });
        table.appendChild(body); section.appendChild(table);
        if (members.length > limit) {
          var more = document.createElement("button"); more.type = "button"; more.className = "more";
          more.textContent = "show " + Math.min(WINDOW * 5, members.length - limit) + " more of " + (members.length - limit);
          more.addEventListener("click", function () { shown[key] = limit + WINDOW * 5; render(); });
          section.appendChild(more);
        }
      }
      fragment.appendChild(section);
    });
    root.replaceChildren(fragment);
  }
  readHash();
  fillSelects();
  render();
  window.addEventListener("hashchange", function () { readHash(); shown = {}; render(); });
})();
"""


def _filters_form() -> str:
    selects = "".join(
        f'<label>{escape(words)} <select name="{name}"><option value="">all</option></select></label>'
        for name, words in (("class", "re-validated class"), ("finding", "finding"), ("task", "task"),
                            ("original", "original verdict"))
    )
    return (f'<form class="filters" id="filters" role="search">{selects}'
            '<button type="button" id="clear">clear filters</button> <span id="matching" class="sub"></span></form>'
            '<p class="problems" id="filter-problem" role="alert" hidden></p>')


def write_batch_index(path: str | Path, lines: Iterable[IndexedLine], summary: dict[str, Any]) -> None:
    """Write the batch's ``index.html`` from its result lines (read once, in order) and its summary."""
    body_head = (
        "<h1>litmus-replay revalidate</h1>\n"
        f'<p class="sub">{_headline(summary)}</p>\n'
        f'<div class="lead"><div>{_chart(summary)}</div><div>{_table(summary)}</div>'
        f"<div>{_findings_table(summary)}</div></div>\n{_agreement(summary)}\n"
        f"{_filters_form()}\n"
        '<noscript><p class="problems">The list of runs needs JavaScript; results.jsonl beside this page holds'
        " every run.</p></noscript>\n"
        '<div id="groups"></div>\n'
        '<script type="application/json" id="runs-data">'
        + _json({"columns": COLUMNS, "groups": GROUPS, "known": KNOWN_VALUES})[:-1]
        + ',"rows":['
    )
    marker = "\x00BODY\x00"
    before, after = html_page("litmus-replay · revalidate", marker, script=_SCRIPT, css=_CSS).split(marker)
    with open_atomic(path) as handle:
        handle.write(before + body_head)
        _write_rows(handle, lines)
        handle.write("]}</script>" + after)


def _write_rows(handle: IO[str], lines: Iterable[IndexedLine]) -> None:
    first = True
    for line in lines:
        handle.write(("" if first else ",\n") + _json(_row(line)))
        first = False
