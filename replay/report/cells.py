"""The words in a pair table's cells, shared by the terminal, Markdown and HTML reports so they agree."""

from __future__ import annotations

import json
from typing import Any

from litmus_replay.envs import Outcome

from ..engine import CallReplay

__all__ = ["CELL_LEGEND", "PAIR_COLUMNS", "class_cell", "evidence_lines", "outcome_cell", "preview", "recorded_as_stub"]

# The world columns say what each world answered; the policy columns what the policy judged at each moment,
# which is not whether the world let the call through ("policy at commit: allow" beside "real world:
# error 403" is a call the policy allowed and the world refused).
PAIR_COLUMNS = ("turn", "call", "tool", "stub world", "real world", "policy at proposal", "policy at commit", "class",
                "evidence")

# What the world columns' cells mean (outcome_cell), said under the terminal's tables and in the help.
CELL_LEGEND = ("stub world / real world: what each world answered (ok, pending, error CODE), then the effects it "
               "committed: +N created, ~N changed, -N deleted (ok -4: ok, 4 deleted); (not applied): ok, nothing "
               "committed; (seen in part): some effects could not be observed. policy at proposal / at commit: the "
               "policy's verdict on the call at each moment, not the world's answer.")


def outcome_cell(outcome: Outcome | None) -> str:
    """A short description of an outcome: status, error code and effect counts (``ok +1``, ``error 403``)."""
    if outcome is None:
        return "harness error"
    text = outcome.status
    if outcome.error_code:
        text += f" {outcome.error_code}"
    effects = outcome.effects
    parts = [f"+{len(effects.created)}" if effects.created else "", f"~{len(effects.changed)}" if effects.changed else "",
             f"-{len(effects.deleted)}" if effects.deleted else ""]
    changes = " ".join(p for p in parts if p) + (" (seen in part)" if effects.unobserved else "")
    if outcome.status == "ok" and not outcome.committed:
        text += " (not applied)"
    return f"{text} {changes}".strip() if changes else text


def class_cell(call: CallReplay) -> str:
    """The pair class, with the reason when unscoreable."""
    return call.pair.cls.value + (f" ({call.pair.reason.value})" if call.pair.reason else "")


def evidence_lines(call: CallReplay) -> list[str]:
    """Why the pair got its class: the explanation, then each moment's evidence, then a harness error."""
    lines = [call.pair.explanation]
    lines += [f"proposal: {line}" for line in call.proposal.evidence]
    if call.commit is not None:
        lines += [f"commit: {line}" for line in call.commit.evidence]
    for moment, outcome in (("proposal", call.stub), ("commit", call.real)):
        if outcome is not None and outcome.effects.unobserved:
            lines.append(f"{moment}: effects seen in part: {outcome.effects.unobserved}")
    if call.harness_error:
        lines.append(f"harness: {call.harness_error}")
    return [line for line in lines if line]


def preview(value: Any, limit: int = 2000) -> str:
    """Compact JSON of a recorded value, cut at ``limit`` characters (recorded outputs can be large).
    Compact, not indented: json's C encoder is several times faster, and a batch writes thousands."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def recorded_as_stub(call: CallReplay) -> bool:
    """Whether a call's recorded result is just what the stub gave (an ``ok`` result with the stub's output):
    a page then says so instead of printing the output twice, since a batch writes thousands of pages."""
    recorded = call.call.result
    return (recorded is not None and recorded.status == "ok" and not recorded.error and recorded.output is not None
            and bool(call.recorded_match) and call.stub.status == "ok")


def plural(count: int, word: str, many: str | None = None) -> str:
    """``1 trajectory``, ``2 trajectories``: a count with its noun in the right number."""
    if count == 1:
        return f"{count} {word}"
    return f"{count} {many or (word[:-1] + 'ies' if word.endswith('y') and word[-2:-1] not in 'aeiou' else word + 's')}"
