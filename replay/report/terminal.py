"""The terminal report: one table per trajectory and a one-line summary, drawn with rich."""

from __future__ import annotations

from typing import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from ..analysis import Analysis, class_counts
from ..scoring import PairClass
from ..verdicts import FINDINGS, FLAGGED
from .cells import PAIR_COLUMNS, class_cell, evidence_lines, outcome_cell, plural
from .html import lead_text
from .visible import visible

CLASS_STYLE = {
    PairClass.CONFIRMED_MISUSE: "bold red",
    PairClass.CONFIRMED_SAFE: "green",
    PairClass.PROPOSAL_ONLY_MISUSE: "yellow",
    PairClass.COMMIT_ONLY_MISUSE: "bold magenta",
    PairClass.UNSCOREABLE: "cyan",
}


FINDING_STYLE = {"high": "bold red", "warning": "yellow", "info": "dim"}


def print_trajectory(console: Console, run: Analysis, evidence: bool = False) -> None:
    """The pair table, the trajectory's re-validation line, its expectations when it had any, and its
    findings (never-proposed critical rules left out); with ``evidence``, why each call got its class."""
    result, problems = run.replay, run.problems
    trajectory = result.trajectory
    original = trajectory.original_verdict.label if trajectory.original_verdict else "none"
    title = visible(f"{result.scenario or trajectory.id} · trajectory {trajectory.id} as {trajectory.principal} · "
                    f"original verdict: {original}")
    # Recorded content (ids, tool names, principals) is plain Text, never rich markup ("[/x]" in an id must
    # not crash), with its control characters made visible.
    table = Table(title=Text(title), title_justify="left", show_lines=False, expand=False)
    for column in PAIR_COLUMNS[:-1]:  # the evidence is on the pages (and under each call with -v)
        table.add_column(column, no_wrap=column in ("call", "class"))
    for call in result.calls:
        cells = (
            str(call.turn),
            call.key,
            call.call.tool,
            outcome_cell(call.stub),
            outcome_cell(call.real),
            call.proposal.policy_verdict,
            call.commit.policy_verdict if call.commit else "-",
        )
        table.add_row(*(Text(visible(cell)) for cell in cells), Text(class_cell(call), style=CLASS_STYLE[call.pair.cls]))
    console.print(table)
    if evidence:
        for call in result.calls:
            for line in evidence_lines(call):
                console.print(Text(visible(f"  {call.key}: {line}"), style="dim"))
    revalidation = result.revalidation
    line = Text("  → ")
    line.append(revalidation.revalidated.value, style=CLASS_STYLE[revalidation.revalidated])
    line.append(f" · {revalidation.finding}")
    if revalidation.critical:
        line.append(" · critical: " + ", ".join(f"{visible(key)}={cls.value}" for key, cls in revalidation.critical.items()))
    if problems is not None:
        if problems:
            line.append(" · expectations FAILED: " + visible("; ".join(problems)), style="bold red")
        else:
            line.append(" · expectations met", style="green")
    console.print(line)
    lead = lead_text(run)
    if lead:  # the run's judgements: which disagree, the decisive call and its rule, the benchmark's check
        console.print(Text("  = " + visible(lead), style="bold" if run.verdict and run.verdict.flagged else ""))
    for finding in run.notable_findings:
        console.print(Text(f"  ! {finding.kind}: {visible(finding.sentence)}", style=FINDING_STYLE[finding.severity]))
    console.print()


def print_run_summary(console: Console, runs: Sequence[Analysis], errors: int) -> None:
    """One line: trajectories, calls, calls per class, expectations met, input errors."""
    counts = class_counts(runs)
    calls = sum(counts.values())
    checked = sum(1 for run in runs if run.problems is not None)
    failed = sum(1 for run in runs if run.problems)
    parts = [plural(len(runs), "trajectory"), plural(calls, "call")]
    parts += [f"{cls} {n}" for cls, n in counts.items() if n]
    if checked:
        parts.append(f"expectations {checked - failed}/{checked} met")
    if errors:
        parts.append(plural(errors, "input error"))
    console.print(Text(" · ".join(parts)))


UNKNOWN_TOOLS_SHOWN = 12


def finding_counts(summary: dict) -> dict[str, int]:
    """Runs per finding, over every original verdict (``summary['findings']``; a summary written before it had
    them counts its named lists of over- and under-penalised runs)."""
    counts: dict[str, int] = {}
    for row in (summary.get("findings") or {}).values():
        for finding, runs in row.items():
            counts[finding] = counts.get(finding, 0) + runs
    if "findings" not in summary:
        counts.update({name: len(summary.get(name) or ()) for name in ("over_penalised", "under_penalised")})
    return counts


def print_revalidation(console: Console, summary: dict) -> None:
    """The re-validation table: original verdicts (rows) against re-validated classes (columns)."""
    columns = [c for c in (*(cls.value for cls in PairClass), "no_tool_calls", "missing_world", "harness_error",
                           "input_error")
               if any(c in row for row in summary["table"].values())]
    table = Table(title=Text(f"re-validation of {plural(summary['runs'], 'run')}"), title_justify="left")
    table.add_column("original verdict")
    for column in columns:
        table.add_column(column, justify="right")
    for original, row in summary["table"].items():
        # original verdict labels are recorded text: never markup ("[/oops]" is a label, not a closing tag)
        table.add_row(Text(visible(original)), *(Text(str(row.get(column, 0))) for column in columns))
    console.print(table)
    counts = finding_counts(summary)
    console.print(Text(
        f"over-penalised (original misuse, environment refused): {counts.get('over_penalised', 0)} · "
        f"under-penalised (original safe, commit-only misuse): {counts.get('under_penalised', 0)}"
        + (f" · missing world: {len(summary['missing_world'])}" if summary["missing_world"] else "")
        + (f" · harness errors: {len(summary['harness_error'])}" if summary["harness_error"] else "")
        + (f" · no tool call (verdict stands): {len(summary['no_tool_calls'])}" if summary.get("no_tool_calls") else "")
    ))
    # every other finding in which two judgements disagree, with its meaning (the words of results.jsonl)
    for finding in FLAGGED:
        if finding not in ("over_penalised", "under_penalised") and counts.get(finding):
            console.print(Text(f"{finding}: {counts[finding]} — {FINDINGS[finding]}"))
    if counts.get("not_judged"):
        console.print(Text(f"not_judged: {counts['not_judged']} — {FINDINGS['not_judged']}"))
    if summary.get("incomplete"):
        console.print(Text(f"recorded by the benchmark as cut short (an error or a limit): {len(summary['incomplete'])} — "
                           f"their calls are only those made before (results.jsonl: incomplete)"))
    unknown = summary.get("unknown_tools") or {}
    if unknown:
        shown = list(unknown.items())[:UNKNOWN_TOOLS_SHOWN]
        more = f" and {len(unknown) - len(shown)} more" if len(unknown) > len(shown) else ""
        console.print(
            Text("unknown tools (calls scored unscoreable; bind them to a domain tool): "
                 + ", ".join(f"{visible(name)} ×{count}" for name, count in shown) + more)
        )
    checks = summary.get("checks")
    if checks:
        console.print(Text("agreement with the benchmark's own checks: " + " · ".join(
            f"{visible(name)} {rate['agree']}/{rate['runs']} ({rate['rate']:.1%})"
            for name, rate in checks["agreement"].items())))
        drift = checks.get("drift") or {}
        if drift.get("calls"):
            console.print(f"calls the benchmark's environment answers differently today than in the recording: "
                          f"{drift['calls']}, in {drift['runs']} runs (results.jsonl: drift)")
        for item in checks["disagreements"]:
            console.print(Text(visible(f"  {item['run']}: {item['check']} recorded {item['recorded']}, replayed "
                                       f"{item['replayed']} — {item['explanation']}")))
