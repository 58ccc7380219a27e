"""The terminal report: one table per trajectory and a one-line summary, drawn with rich."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from litmus_replay.envs import Outcome

from ..engine import TrajectoryReplay
from ..scoring import PairClass

CLASS_STYLE = {
    PairClass.CONFIRMED_MISUSE: "bold red",
    PairClass.CONFIRMED_SAFE: "green",
    PairClass.PROPOSAL_ONLY_MISUSE: "yellow",
    PairClass.COMMIT_ONLY_MISUSE: "bold magenta",
    PairClass.UNSCOREABLE: "cyan",
}


def outcome_cell(outcome: Outcome | None) -> str:
    """A short description of an outcome: status, error code and effect counts."""
    if outcome is None:
        return "harness error"
    text = outcome.status
    if outcome.error_code:
        text += f" {outcome.error_code}"
    effects = outcome.effects
    parts = [f"+{len(effects.created)}" if effects.created else "", f"~{len(effects.changed)}" if effects.changed else "",
             f"-{len(effects.deleted)}" if effects.deleted else ""]
    changes = " ".join(p for p in parts if p)
    if outcome.status == "ok" and not outcome.committed:
        text += " (not applied)"
    return f"{text} {changes}".strip() if changes else text


def print_trajectory(console: Console, result: TrajectoryReplay, problems: list[str] | None = None) -> None:
    trajectory = result.trajectory
    original = trajectory.original_verdict.label if trajectory.original_verdict else "none"
    title = f"{result.scenario or trajectory.id} · trajectory {trajectory.id} as {trajectory.principal} · original verdict: {original}"
    table = Table(title=title, title_justify="left", show_lines=False, expand=False)
    for column in ("turn", "call", "tool", "stub", "real", "proposal", "commit", "class"):
        table.add_column(column, no_wrap=column in ("call", "class"))
    for call in result.calls:
        reason = f" ({call.pair.reason.value})" if call.pair.reason else ""
        table.add_row(
            str(call.turn),
            call.key,
            call.call.tool,
            outcome_cell(call.stub),
            outcome_cell(call.real),
            call.proposal.policy_verdict,
            call.commit.policy_verdict if call.commit else "-",
            Text(call.pair.cls.value + reason, style=CLASS_STYLE[call.pair.cls]),
        )
    console.print(table)
    revalidation = result.revalidation
    line = Text("  → ")
    line.append(revalidation.revalidated.value, style=CLASS_STYLE[revalidation.revalidated])
    line.append(f" · {revalidation.finding}")
    if revalidation.critical:
        line.append(" · critical: " + ", ".join(f"{key}={cls.value}" for key, cls in revalidation.critical.items()))
    if problems is not None:
        if problems:
            line.append(" · expectations FAILED: " + "; ".join(problems), style="bold red")
        else:
            line.append(" · expectations met", style="green")
    console.print(line)
    console.print()


def print_run_summary(console: Console, results: list[TrajectoryReplay], failed: int, checked: int, errors: int) -> None:
    counts: dict[PairClass, int] = {cls: 0 for cls in PairClass}
    for result in results:
        for call in result.calls:
            counts[call.pair.cls] += 1
    calls = sum(counts.values())
    parts = [f"{len(results)} trajectories", f"{calls} calls"]
    parts += [f"{cls.value} {n}" for cls, n in counts.items() if n]
    if checked:
        parts.append(f"expectations {checked - failed}/{checked} met")
    if errors:
        parts.append(f"{errors} input error{'s' if errors != 1 else ''}")
    console.print(" · ".join(parts))
