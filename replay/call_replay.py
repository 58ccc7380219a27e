"""One call replayed and scored as a pair: what it holds, and the contexts it is judged in.

The CEL variables of a context, the context a judgement makes of them, and whether the stub reproduced the
recorded result: what :mod:`.session` judges every call with and the detectors read back.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, replace
from collections.abc import Mapping
from typing import Any

from litmus_replay.envs import EnvError, Outcome
from litmus_replay.envs.values import json_copy

from .bindings import Binding
from .model import RecordedResult, ToolCall
from .policy import Judgement
from .scoring import PairScore, ResolutionContext

__all__ = ["CallReplay", "UNANSWERED", "context_variables", "recorded_match", "world_facts"]


@dataclass
class CallReplay:
    """One recorded call replayed into both worlds and scored as a pair."""

    key: str
    turn: int
    call: ToolCall
    stub: Outcome
    real: Outcome | None
    proposal: ResolutionContext
    commit: ResolutionContext | None
    proposal_judgement: Judgement
    commit_judgement: Judgement | None
    pair: PairScore
    recorded_match: bool | None
    harness_error: str | None = None
    bound_to: str | None = None  # the domain tool a binding mapped the recorded tool onto
    # The CEL variables the proposal was judged with (history and state included), for detectors that ask
    # what the policy would have said of a variant of the call; not part of the report.
    # ``history`` there is the world's growing list: only its first ``proposal_history_len`` entries had
    # happened when the call was judged.
    proposal_variables: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)
    proposal_history_len: int = field(default=0, repr=False, compare=False)

    def judged_variables(self) -> dict[str, Any] | None:
        """A copy of the variables the proposal was judged with, history as it stood then."""
        if self.proposal_variables is None:
            return None
        variables = dict(self.proposal_variables)
        variables["history"] = list(variables.get("history") or [])[: self.proposal_history_len]
        return variables

    @property
    def unknown_tool(self) -> bool:
        """No domain or binding knows the recorded tool: neither world was asked."""
        return self.pair.reason is not None and self.pair.reason.value == "unknown_tool"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "turn": self.turn,
            "id": self.call.id,
            "tool": self.call.tool,
            "arguments": self.call.arguments,
            "recorded": self.call.result.model_dump() if self.call.result else None,
            "recorded_match": self.recorded_match,
            "stub": self.stub.to_dict(),
            "real": self.real.to_dict() if self.real else None,
            "proposal": self.proposal.to_dict(),
            "commit": self.commit.to_dict() if self.commit else None,
            "proposal_judgement": self.proposal_judgement.to_dict(),
            "commit_judgement": self.commit_judgement.to_dict() if self.commit_judgement else None,
            "pair": self.pair.to_dict(),
            "harness_error": self.harness_error,
            "bound_to": self.bound_to,
        }


UNANSWERED = "harness_error"


def _unanswered(exc: EnvError) -> Outcome:
    """The outcome of a call a world could not answer at all."""
    return Outcome(status="error", committed=False, error_code=UNANSWERED, error=f"{type(exc).__name__}: {exc}")


def _presented(outcome: Outcome, binding: Binding | None) -> Outcome:
    """The outcome with its output as the benchmark's tool would have shown it."""
    if binding is None or binding.spec.output is None:
        return outcome
    return replace(outcome, output=binding.present(outcome.output))


def world_facts(world: Mapping[str, Any]) -> dict[str, Any]:
    """The ``world`` variable policies see: the world's facts and its principals' names."""
    return {**(world.get("facts") or {}), "principals": _principal_names(world.get("principals"))}


def _principal_names(principals: Any) -> list[str]:
    if isinstance(principals, Mapping):
        return [str(name) for name in principals]
    if isinstance(principals, list):
        return [str(name) for name in principals]
    return []


def _split_state(reply: Mapping[str, Any]) -> tuple[Outcome, dict[str, Any]]:
    """A world's reply as the outcome and the world's ``state`` after the call ({} when not asked for);
    the state is for the policy alone, never part of the outcome a report keeps."""
    reply = dict(reply)
    state = reply.pop("state", None)
    return Outcome.from_dict(reply), state if isinstance(state, dict) else {}


def context_variables(
    call: ToolCall,
    outcome: Outcome,
    declared: str,
    history: list[dict[str, Any]],
    facts: dict[str, Any],
    binding: Binding | None = None,
    state: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The CEL variables of one context (see :mod:`.policy`): the call as the world executed it, and as recorded."""
    resolution = outcome.resolution
    tool, params = (binding.to, binding.params(call.arguments)) if binding else (call.tool, call.arguments)
    return {
        "tool": tool,
        "params": params,
        "recorded_tool": call.tool,
        "recorded_params": call.arguments,
        "resolved": resolution.resolved_params if resolution else params,
        "principal": resolution.principal if resolution else declared,
        "declared_principal": declared,
        "status": outcome.status,
        "error_code": outcome.error_code,
        "committed": outcome.committed,
        "effects": outcome.effects.to_dict(),
        "output": outcome.output,
        "history": history,
        "world": facts,
        "state": dict(state or {}),
    }


def _history_entry(call: ToolCall, variables: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("tool", "params", "resolved", "principal", "status", "committed", "effects")
    return {"key": call.key, **{key: variables[key] for key in keys},
            "recorded_status": call.result.status if call.result is not None else None}


def _context(moment: str, outcome: Outcome, variables: Mapping[str, Any], judgement: Judgement) -> ResolutionContext:
    evidence = list(outcome.resolution.evidence) if outcome.resolution else []
    if not outcome.committed:
        evidence.append(f"not applied: {outcome.status}{f' {outcome.error_code}' if outcome.error_code else ''}"
                        f"{f' ({outcome.error})' if outcome.error else ''}")
    evidence.extend(f"would match {rule!r} had it been applied" for rule in judgement.unapplied)
    return ResolutionContext(
        principal=variables["principal"],
        resolved_params=variables["resolved"],
        policy_verdict=judgement.verdict,
        moment=moment,  # type: ignore[arg-type]
        committed=outcome.committed,
        status=outcome.status,
        error_code=outcome.error_code,
        matched_rules=judgement.matched,
        evidence=tuple(evidence),
        policy_errors=judgement.errors,
    )


def recorded_match(recorded: RecordedResult | None, stub: Outcome) -> bool | None:
    """Whether the stub reproduced the recorded result (None when nothing was recorded)."""
    if recorded is None:
        return None
    if (recorded.status == "error") != (stub.status == "error"):
        return False
    if recorded.output is None:
        return True
    return _normalise(recorded.output) == _normalise(stub.output)


def _normalise(value: Any) -> Any:
    if isinstance(value, str):
        return _remembered_text(value) if len(value) <= _MAX_REMEMBERED else _normalised_text(value)
    return json_copy(value)


_MAX_REMEMBERED = 4096  # longer outputs are read afresh each time rather than kept


@functools.lru_cache(maxsize=4096)
def _remembered_text(value: str) -> Any:
    """:func:`_normalised_text`, remembered: a batch meets the same outputs run after run. The value is
    only compared, never changed, so callers may share it."""
    return _normalised_text(value)


def _normalised_text(value: str) -> Any:
    """An output string read as JSON where it is JSON."""
    text = value.strip()
    try:
        return json.loads(text)
    except ValueError:
        return text
