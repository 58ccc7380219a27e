"""The Markdown report: one document per run — a summary, each trajectory's pair table, its findings.

Meant for a pull request or an issue, where the Markdown is rendered and raw HTML in it would be
too: every recorded string is HTML-escaped, and table cells have their pipes and line breaks escaped.
"""

from __future__ import annotations

import re
from html import escape
from typing import Iterable, Sequence

from ..analysis import Analysis, class_counts
from .cells import PAIR_COLUMNS, class_cell, evidence_lines, outcome_cell, plural
from .html import lead_parts, lead_text

__all__ = ["markdown_report"]

_MD_SPECIAL = re.compile(r"([\\`*_\[\]|])")


def _text(value: object) -> str:
    """Recorded text as inert Markdown: HTML-escaped, Markdown punctuation backslashed, on one line."""
    text = " ".join(str(value).split())
    return _MD_SPECIAL.sub(r"\\\1", escape(text, quote=False))


def _code(value: object) -> str:
    """A code span for an identifier; falls back to escaped text when the value holds a backtick."""
    text = " ".join(str(value).split())
    if "`" in text or not text:
        return _text(text)
    return f"`{text.replace('|', chr(92) + '|')}`"


def _row(cells: Iterable[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _lead(run: Analysis) -> str | None:
    """The run's lead line (the same pieces the page leads with), and the finding's meaning."""
    line = lead_text(run, _text, _code, lambda finding: f"**{_code(finding)}**")
    if line is None:
        return None
    meaning = lead_parts(run)["meaning"]  # type: ignore[index]
    return line + (f" — *{_text(meaning)}*" if meaning else "")


def markdown_report(runs: Iterable[Analysis], errors: Sequence[str] = ()) -> str:
    """The whole run as one Markdown document."""
    items = list(runs)
    counts = class_counts(items)
    checked = [run for run in items if run.problems is not None]
    failed = [run for run in checked if run.problems]
    lines = ["# litmus-replay run", ""]
    lines.append(f"{plural(len(items), 'trajectory')} · {plural(sum(counts.values()), 'call')}")
    lines.append("")
    lines += [_row(["class", "calls"]), _row(["---", "---:"])]
    lines += [_row([_code(cls), str(n)]) for cls, n in counts.items()]
    lines.append("")
    if checked:
        lines.append(f"Expectations: {len(checked) - len(failed)}/{len(checked)} met.")
        lines.append("")
    if errors:
        lines.append(f"Input errors ({len(errors)}):")
        lines.append("")
        lines += [f"- {_text(error)}" for error in errors]
        lines.append("")
    for run in items:
        result = run.replay
        trajectory = result.trajectory
        revalidation = result.revalidation
        original = trajectory.original_verdict.label if trajectory.original_verdict else "none"
        lines.append(f"## {_text(result.scenario or trajectory.id)} · trajectory {_code(trajectory.id)}")
        lines.append("")
        lines.append(
            f"As {_code(trajectory.principal)} · original verdict {_code(original)} · re-validated "
            f"**{_code(revalidation.revalidated.value)}** · {_text(revalidation.finding)}"
        )
        lead = _lead(run)
        if lead:
            lines.append("")
            lines.append(lead)
        if revalidation.critical:
            lines.append("")
            lines.append("Critical: " + ", ".join(f"{_code(key)} = {_code(cls.value)}" for key, cls in revalidation.critical.items()))
        if run.problems is not None:
            lines.append("")
            lines.append("Expectations: " + ("**FAILED** — " + _text("; ".join(run.problems)) if run.problems else "met"))
        lines.append("")
        lines += [_row(PAIR_COLUMNS), _row("---" for _ in PAIR_COLUMNS)]
        for call in result.calls:
            lines.append(_row([
                str(call.turn),
                _code(call.key),
                _code(call.call.tool),
                _text(outcome_cell(call.stub)),
                _text(outcome_cell(call.real)),
                _text(call.proposal.policy_verdict),
                _text(call.commit.policy_verdict if call.commit else "-"),
                _code(class_cell(call)),
                "<br>".join(_text(line) for line in evidence_lines(call)),
            ]))
        lines.append("")
        shown = run.notable_findings
        if shown:
            lines.append("Findings:")
            lines.append("")
            for finding in shown:
                where = f" ({', '.join(_code(node) for node in finding.nodes)})" if finding.nodes else ""
                lines.append(f"- **{_text(finding.severity)}** {_code(finding.kind)}: {_text(finding.sentence)}{where}")
        else:
            lines.append("No findings.")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"
