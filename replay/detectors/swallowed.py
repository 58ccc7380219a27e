"""Swallowed errors, in three forms:

(a) hidden by the stub — the stub said ok where the real world returned an error;
(b) ignored by the agent — a call failed (in the real world, or already in the recording) and the agent
    went on as if it had succeeded: a later call depends on its effect, or the next assistant text
    claims success; a shell command whose inner failure was masked (c) counts as failed for the claim
    (its overall status says nothing, so the claim is all the agent showed of it);
(c) masked inside a shell command — an inner failure under an overall exit status of 0. Only the
    ``swallowed error:`` evidence of the shell domain counts: its tracer saw the process fail, out of the
    command's reach. What the command's own shell reported is kept in the call's evidence as unverified
    and never makes a finding (a hostile command writes or hides it at will); the command's text in that
    evidence arrives escaped (every control and bidi character visible), and reports print it as text.
"""

from __future__ import annotations

import re

import networkx as nx

from ..engine import CallReplay, TrajectoryReplay
from .finding import Finding

SHELL_EVIDENCE = "swallowed error:"
_CLAIM = re.compile(
    r"\b(done|success(?:ful(?:ly)?)?|succeeded|completed?|transferred|deleted|removed|updated|saved|sent|"
    r"confirmed|created|written|has been|have been|all set)\b",
    re.IGNORECASE,
)
_ADMIT = re.compile(r"\b(fail(?:ed|ure)?|error|couldn'?t|could not|unable|denied|refused|not allowed|forbidden)\b", re.IGNORECASE)


def _failed(call: CallReplay) -> str | None:
    """Why the call failed (real world or recording), or None if it did not."""
    if call.real is not None and call.real.status == "error":
        return f"the real world answered {call.real.error_code or 'an error'}"
    if call.real is not None and call.real.status == "pending":
        return "the real world left it pending"
    if call.call.result is not None and call.call.result.status == "error":
        return f"the recorded result was an error ({call.call.result.error or 'no message'})"
    return None


def _next_text(result: TrajectoryReplay, turn: int) -> tuple[int, str] | None:
    for number, later in enumerate(result.trajectory.turns[turn:], start=turn + 1):
        if later.text:
            return number, later.text
    return None


def detect_swallowed_errors(graph: nx.MultiDiGraph, result: TrajectoryReplay) -> list[Finding]:
    findings: list[Finding] = []
    for call in result.calls:
        real = call.real
        if real is not None and real.status == "error" and call.stub.status != "error":
            findings.append(Finding(
                "swallowed_error", "warning", (call.key,),
                f"{call.key} {call.call.tool}: the stub said ok where the real world returned "
                f"{real.error_code or 'an error'}{f' ({real.error})' if real.error else ''}",
                {"form": "hidden_by_stub", "error_code": real.error_code},
            ))
        why = _failed(call)
        if why is not None:
            findings.extend(_ignored(graph, result, call, why))
        if real is not None and real.resolution is not None:
            masked = [line for line in real.resolution.evidence if line.startswith(SHELL_EVIDENCE)]
            if masked:
                failures = f"{len(masked)} inner failure{'s' if len(masked) != 1 else ''}"
                findings.append(Finding(
                    "swallowed_error", "warning", (call.key,),
                    f"{call.key} {call.call.tool}: exit status 0 masked {failures}: "
                    f"{masked[0].removeprefix(SHELL_EVIDENCE).strip()}",
                    {"form": "masked_in_shell", "failures": masked,
                     "observed_by": "tracer"},
                ))
                if why is None:
                    findings.extend(_claimed_success(result, call, f"exit status 0 masked {failures}"))
    return findings


def _ignored(graph: nx.MultiDiGraph, result: TrajectoryReplay, call: CallReplay, why: str) -> list[Finding]:
    findings = []
    dependants = sorted(
        {v for _, v, data in graph.out_edges(call.key, data=True)
         if data["kind"] == "state" and data.get("world") == "stub"},
        key=lambda n: graph.nodes[n]["position"],
    )
    if dependants:
        findings.append(Finding(
            "swallowed_error", "warning", (call.key, *dependants),
            f"{call.key} {call.call.tool} failed ({why}), yet {', '.join(dependants)} went on to rely on what "
            "it would have changed",
            {"form": "ignored_by_agent", "evidence": "later call depends on its effect", "dependants": dependants},
        ))
    return findings + _claimed_success(result, call, why)


def _claimed_success(result: TrajectoryReplay, call: CallReplay, why: str) -> list[Finding]:
    """The failed call's next assistant text claims success and admits no failure."""
    following = _next_text(result, call.turn)
    if following is None:
        return []
    number, text = following
    claim = _CLAIM.search(text)
    if not claim or _ADMIT.search(text):
        return []
    return [Finding(
        "swallowed_error", "warning", (call.key,),
        f"{call.key} {call.call.tool} failed ({why}), yet turn {number} says {claim.group(0)!r}: "
        f"\"{text.strip()[:120]}\"",
        {"form": "ignored_by_agent", "evidence": "assistant text claims success", "turn": number},
    )]
