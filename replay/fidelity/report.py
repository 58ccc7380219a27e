"""The fidelity report: agreement per tool and per divergence class, with the examples tried and each
distinct minimal counterexample; as JSON, a terminal table and an HTML page."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..report.atomic import write_atomic
from .divergence import CLASSES
from .lab import FidelityResult

__all__ = ["FORMAT_VERSION", "FidelityReport", "print_report", "describe_counterexamples", "report_html", "write_report"]

FORMAT_VERSION = 1


@dataclass
class FidelityReport:
    """Every domain measured in one run, how, and where each counterexample was written."""

    results: list[FidelityResult]
    seed: int
    examples: int
    runtime: str
    files: dict[int, str] = field(default_factory=dict)  # id(counterexample) -> scenario path

    def to_dict(self) -> dict[str, Any]:
        return {
            "format_version": FORMAT_VERSION,
            "seed": self.seed,
            "examples": self.examples,
            "runtime": self.runtime,
            "domains": [self._result(result) for result in self.results],
        }

    def _result(self, result: FidelityResult) -> dict[str, Any]:
        tally = result.tally
        return {
            "domain": result.domain,
            "profile": result.profile,
            "agreement": round(result.agreement, 4),
            "examples": tally.examples,
            "search_examples": result.search_examples,
            "calls_compared": tally.compared,
            "calls_after_divergence": tally.after_divergence,
            "error": result.error,
            "tools": {
                tool: {
                    "calls": tally.calls[tool],
                    "agreed": tally.agreed[tool],
                    "agreement": round(tally.agreed[tool] / tally.calls[tool], 4),
                    "classes": {cls: tally.classes[(tool, cls)] for cls in CLASSES if tally.classes[(tool, cls)]},
                }
                for tool in sorted(tally.calls)
            },
            "classes": {cls: sum(n for (_, c), n in tally.classes.items() if c == cls) for cls in CLASSES},
            "kinds": dict(sorted(tally.kinds.items())),
            "counterexamples": [
                {**example.to_dict(), "scenario": self.files.get(id(example))} for example in result.counterexamples
            ],
        }


# The agreement of a tool the search found a counterexample for, where the counting pass met no divergence
# of it: the search rounds and the counting pass draw different sequences, so a divergence one of them met
# the other may miss.
SEARCH_ONLY = "< 100 %"
SEARCH_ONLY_NOTE = (f"{SEARCH_ONLY}: every call counted agreed, but the search found a counterexample for the tool, "
                    "so the stub does not always agree")


def agreement_cell(agreed: int, calls: int, diverges: bool) -> str:
    """The agreement column's text, to one decimal: only agreement on every call counted reads 100.0 %
    (99.97 % is 99.9 %, not rounded up), and never a tool with a counterexample (``diverges``)."""
    if not calls:
        return "-"
    if agreed >= calls:
        return SEARCH_ONLY if diverges else "100.0 %"
    return f"{min(round(100 * agreed / calls, 1), 99.9):.1f} %"


def _diverging_tools(result: FidelityResult) -> set[str]:
    """The tools of the diverging last calls of a result's counterexamples."""
    return {example.steps[-1].request["tool"] for example in result.counterexamples}


def print_report(report: FidelityReport, console: Console, counterexamples: bool = True, outcomes: bool = False) -> None:
    """The agreement table; then, with ``counterexamples``, each domain's minimal counterexamples, and with
    ``outcomes`` each call by call with both worlds' answers to the last."""
    table = Table(title=f"stub fidelity · seed {report.seed} · {report.examples} examples · real runtime {report.runtime}")
    for column in ("domain", "tool", "calls", "agreement", *CLASSES):
        table.add_column(column, justify="left" if column in ("domain", "tool") else "right")
    search_only = False
    for result in report.results:
        tally = result.tally
        diverging = _diverging_tools(result)
        for tool in sorted(tally.calls):
            cell = agreement_cell(tally.agreed[tool], tally.calls[tool], tool in diverging)
            search_only = search_only or cell == SEARCH_ONLY
            table.add_row(result.label, tool, str(tally.calls[tool]), cell,
                          *(str(tally.classes[(tool, cls)] or "") for cls in CLASSES))
        cell = agreement_cell(sum(tally.agreed.values()), tally.compared, bool(diverging))
        search_only = search_only or cell == SEARCH_ONLY
        table.add_row(result.label, "[b]all[/b]", str(tally.compared), f"[b]{cell}[/b]",
                      *(str(sum(n for (_, c), n in tally.classes.items() if c == cls) or "") for cls in CLASSES),
                      end_section=True)
    console.print(table)
    if search_only:
        console.print(SEARCH_ONLY_NOTE, markup=False)
    for result in report.results:
        if result.error:
            console.print(f"[red]{result.label}: stopped: {result.error}[/red]")
        if not counterexamples:
            continue
        if outcomes and result.counterexamples:
            console.print(f"{result.label}: " + describe_counterexamples(result), markup=False)
            continue
        if not result.counterexamples:
            console.print(f"{result.label}: no counterexample ({result.search_examples} sequences searched)")
            continue
        console.print(f"{result.label}: {len(result.counterexamples)} minimal counterexample(s)")
        for example in result.counterexamples:
            calls = " → ".join(_call_text(step.request) for step in example.steps)
            where = report.files.get(id(example))
            console.print(f"  • {example.kind} \\[{', '.join(example.divergence.classes)}] in {len(example.steps)} call(s): {calls}"
                          + (f"\n    {where}" if where else ""), soft_wrap=True)


def describe_counterexamples(result: FidelityResult) -> str:
    """Plain text: each minimal counterexample of one result, its calls and both outcomes of the last."""
    lines = [f"{len(result.counterexamples)} minimal counterexample(s):"]
    for example in result.counterexamples:
        last = example.steps[-1]
        lines.append(f"- {example.kind} [{', '.join(example.divergence.classes)}] in {len(example.steps)} call(s)")
        lines.extend(f"    {n}. {_call_text(step.request)}" for n, step in enumerate(example.steps, 1))
        lines.append(f"    stub: {_outcome_text(last.stub.to_dict())}; real: {_outcome_text(last.real.to_dict())}; {example.divergence.detail}")
    return "\n".join(lines)


def _call_text(request: dict[str, Any]) -> str:
    params = ", ".join(f"{key}={value!r}" for key, value in request["params"].items())
    return f"{request['tool']}({params}) as {request['principal']}"


def report_html(report: FidelityReport) -> str:
    """One self-contained page: the agreement table and every counterexample with both outcomes."""
    data = report.to_dict()
    rows = []
    search_only = False
    for result in data["domains"]:
        label = result["domain"] + (f":{result['profile']}" if result["profile"] else "")
        diverging = {example["calls"][-1]["request"]["tool"] for example in result["counterexamples"]}
        for tool, row in result["tools"].items():
            cells = "".join(f"<td>{row['classes'].get(cls, '')}</td>" for cls in CLASSES)
            agreement = agreement_cell(row["agreed"], row["calls"], tool in diverging)
            search_only = search_only or agreement == SEARCH_ONLY
            rows.append(f"<tr><td>{_e(label)}</td><td>{_e(tool)}</td><td>{row['calls']}</td>"
                        f"<td>{_e(agreement)}</td>{cells}</tr>")
        agreed = sum(row["agreed"] for row in result["tools"].values())
        agreement = agreement_cell(agreed, result["calls_compared"], bool(diverging))
        search_only = search_only or agreement == SEARCH_ONLY
        rows.append(f"<tr class=total><td>{_e(label)}</td><td>all</td><td>{result['calls_compared']}</td>"
                    f"<td>{_e(agreement)}</td>" + "".join(
                        f"<td>{result['classes'][cls] or ''}</td>" for cls in CLASSES) + "</tr>")
    examples = []
    for result in data["domains"]:
        for example in result["counterexamples"]:
            calls = "".join(
                f"<tr><td>t{n}.c1</td><td>{_e(c['request']['tool'])}</td><td><code>{_e(c['request']['params'])}</code></td>"
                f"<td>{_e(c['request']['principal'])}</td><td>{_e(_outcome_text(c['stub']))}</td><td>{_e(_outcome_text(c['real']))}</td></tr>"
                for n, c in enumerate(example["calls"], 1)
            )
            scenario = f"<p>scenario: <code>{_e(example['scenario'])}</code></p>" if example.get("scenario") else ""
            examples.append(
                f"<section><h3>{_e(example['domain'])}{_e(':' + example['profile'] if example['profile'] else '')} · "
                f"{_e(example['kind'])}</h3><p>{_e(', '.join(example['classes']))} — {_e(example['detail'])}</p>{scenario}"
                f"<table><tr><th>call</th><th>tool</th><th>params</th><th>principal</th><th>stub</th><th>real</th></tr>"
                f"{calls}</table></section>"
            )
    head = "".join(f"<th>{c}</th>" for c in ("domain", "tool", "calls", "agreement", *CLASSES))
    return (
        "<!doctype html><html><head><meta charset=utf-8><title>stub fidelity</title><style>"
        "body{font-family:system-ui,sans-serif;margin:2em}table{border-collapse:collapse;margin:.5em 0}"
        "td,th{border:1px solid #ccc;padding:.2em .5em;text-align:right}td:nth-child(-n+2){text-align:left}"
        "tr.total{font-weight:bold;background:#f4f4f4}</style></head><body>"
        f"<h1>Stub fidelity</h1><p>seed {data['seed']} · {data['examples']} examples per domain · real runtime "
        f"{_e(data['runtime'])}</p><table><tr>{head}</tr>{''.join(rows)}</table>"
        + (f"<p>{_e(SEARCH_ONLY_NOTE)}</p>" if search_only else "") +
        f"<h2>Minimal counterexamples</h2>{''.join(examples) or '<p>none</p>'}</body></html>"
    )


def _outcome_text(outcome: dict[str, Any]) -> str:
    if outcome["status"] == "error":
        return f"error {outcome['error_code']}"
    total = outcome["effects"]["counts"]["total"]
    principal = (outcome.get("resolution") or {}).get("principal")
    return f"{outcome['status']}{'' if outcome['committed'] else ' (not applied)'} · {total} effect(s) · as {principal}"


def _e(value: Any) -> str:
    return html.escape(str(value))


def write_report(report: FidelityReport, out: Path) -> None:
    """``report.json`` and ``index.html`` under ``out``."""
    write_atomic(out / "report.json", json.dumps(report.to_dict(), indent=2, default=str) + "\n")
    write_atomic(out / "index.html", report_html(report))
