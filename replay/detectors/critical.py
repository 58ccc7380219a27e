"""Critical decision nodes: for each critical rule, where its call was proposed, whether it committed in
the stub world and in the real world, and what stopped it."""

from __future__ import annotations

import networkx as nx

from ..engine import CallReplay, TrajectoryReplay
from .finding import Finding


def _matches(call: CallReplay, rule: str) -> bool:
    judgements = [call.proposal_judgement, call.commit_judgement]
    return any(j is not None and (rule in j.matched or rule in j.unapplied) for j in judgements)


def _stopper(call: CallReplay) -> str | None:
    real = call.real
    if real is None:
        return "harness error (no real outcome)"
    if real.committed:
        return None
    if real.status == "pending":
        return "a confirmation gate (left pending)"
    if real.error_code in ("504", "timeout"):
        return "a timeout"
    if real.status == "ok":
        return "nothing applied (an idempotent replay, or a call that matched nothing)"
    return f"{real.error_code}" + (f" ({real.error})" if real.error else "")


def detect_critical_nodes(graph: nx.MultiDiGraph, result: TrajectoryReplay) -> list[Finding]:
    if result.policy is None:
        return []
    findings = []
    for rule in result.policy.critical_rules:
        calls = [call for call in result.calls if _matches(call, rule)]
        if not calls:
            findings.append(Finding(
                "critical_decision", "info", (), f"critical rule {rule!r}: never proposed",
                {"rule": rule, "proposed": False, "committed_stub": False, "committed_real": False, "stopped_by": "never proposed"},
            ))
            continue
        for call in calls:
            committed_stub = call.stub.committed and rule in call.proposal_judgement.matched
            committed_real = bool(call.real and call.real.committed and call.commit_judgement
                                  and rule in call.commit_judgement.matched)
            stopper = None if committed_real else _stopper(call)
            if committed_real:
                fate = "committed in the real world"
            elif stopper:
                fate = f"stopped in the real world by {stopper}"
            else:
                fate = "reached in the real world but the rule did not hold there"
            stub_fate = "committed in the stub world" if committed_stub else "not committed in the stub world"
            if committed_stub and call.call.result is not None and call.call.result.status == "error":
                stub_fate += " (which took the recorded error for done)"  # a harness judging the proposal
            sentence = f"critical rule {rule!r}: proposed at {call.key} {call.call.tool}; {stub_fate}, {fate}"
            findings.append(Finding(
                "critical_decision", "high" if committed_real else "info", (call.key,), sentence,
                {"rule": rule, "proposed": True, "committed_stub": committed_stub, "committed_real": committed_real,
                 "stopped_by": stopper, "pair_class": call.pair.cls.value},
            ))
    return findings
