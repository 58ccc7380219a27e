"""Open-loop twin replay: the recorded calls, in recorded order, into a fresh stub world and a fresh
real world built from the same initial state, each call judged at proposal and at commit.

The stub world stands for the benchmark's harness, so its outcome is the proposal context; the real
world's outcome is the commit context. The stub's output is also compared with the recorded result.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, replace
from collections.abc import Mapping
from typing import Any, Callable

from litmus_replay.envs import EnvError, Outcome
from litmus_replay.envs.runtime import Runtime, WorldHandle, get_runtime
from litmus_replay.envs.values import json_copy

from .bindings import Binding, Bindings
from .model import RecordedResult, ToolCall, Trajectory
from .policy import Judgement, Policy
from .rebuilt_world import RealWorld, final_report
from .scoring import (
    PairScore,
    ResolutionContext,
    Revalidation,
    classify_pair,
    harness_error_pair,
    revalidate_trajectory,
    unknown_tool_pair,
)
from .tools import world_tools
from .verdicts import judge_run


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


@dataclass
class TrajectoryReplay:
    """A whole trajectory replayed: every call's pair and the trajectory's re-validation."""

    trajectory: Trajectory
    calls: list[CallReplay]
    revalidation: Revalidation
    scenario: str | None = None
    # What the graph and detectors read besides the calls; not part of the report itself.
    world: Mapping[str, Any] = field(default_factory=dict, repr=False)
    policy: Policy | None = field(default=None, repr=False)
    initial_resources: frozenset[str] = field(default_factory=frozenset, repr=False)
    # Each world's final domain reports (``WorldHandle.report``), by semantics: "stub" and "real".
    reports: dict[str, dict[str, Any]] = field(default_factory=dict, repr=False)

    def to_dict(self) -> dict[str, Any]:
        verdict = self.trajectory.original_verdict
        return {
            "trajectory": self.trajectory.id,
            "task": self.trajectory.task,
            "scenario": self.scenario,
            "principal": self.trajectory.principal,
            "original_verdict": verdict.model_dump() if verdict else None,
            "revalidation": self.revalidation.to_dict(),
            "calls": [call.to_dict() for call in self.calls],
        }


class Replayer:
    """Replays trajectories against worlds built from one spec and judged by one policy."""

    def __init__(self, policy: Policy, stub_runtime: Runtime | None = None, real_runtime: Runtime | None = None):
        self.policy = policy
        self.stub_runtime = stub_runtime or get_runtime("inprocess")
        self.real_runtime = real_runtime or get_runtime("inprocess")

    def replay(
        self,
        trajectory: Trajectory,
        world: Mapping[str, Any],
        scenario: str | None = None,
        bindings: Bindings | None = None,
    ) -> TrajectoryReplay:
        """Replay every recorded call; a call no domain or binding knows is scored ``unknown_tool``."""
        facts = world_facts(world)
        route = _Router(frozenset(world_tools(world)), bindings or Bindings())
        # Open loop: every request is known before any outcome, so an isolated real world is built and
        # works through the whole run in its server while the stub world is built and called here. Either
        # way the stub world's failure is the one raised first, as when they were opened one after the other.
        plan = [(turn, call, *_request(trajectory, call, route, self.policy.uses_state))
                for turn, call in trajectory.calls()]
        real = RealWorld(self.real_runtime, world, [request for *_, request in plan if request is not None])
        try:
            stub_world = self.stub_runtime.open_world(world, "stub")
        except BaseException:
            real.cancel()
            raise
        try:
            real_world = real.open()
            try:
                try:
                    initial = frozenset(real_world.snapshot())
                except EnvError:  # a world lost before its first call: every call records the harness error
                    initial = frozenset()
                calls = self._replay_calls(plan, stub_world, real.next_outcome, facts)
                reports = {"stub": final_report(stub_world), "real": real.report()}
            finally:
                real.close()
        finally:
            stub_world.close()
        critical = {
            call.key: call.pair.cls
            for call in calls
            if call.proposal_judgement.critical or (call.commit_judgement and call.commit_judgement.critical)
        }
        original = trajectory.original_verdict.label if trajectory.original_verdict else None
        result = revalidate_trajectory(original, (call.pair.cls for call in calls), critical)
        replayed = TrajectoryReplay(
            trajectory, calls, result, scenario, world=world, policy=self.policy, initial_resources=initial,
            reports=reports,
        )
        # the run's finding from its recorded verdict and its calls (analysis adds the benchmark's checks)
        replayed.revalidation = replace(result, finding=judge_run(replayed).finding)
        return replayed

    def _replay_calls(
        self,
        plan: list[tuple[int, ToolCall, str, Binding | None, dict[str, Any] | None]],
        stub_world: WorldHandle,
        real_outcome: Callable[[], dict[str, Any] | EnvError],
        facts: dict[str, Any],
    ) -> list[CallReplay]:
        """Each planned call into the stub world, paired with the real world's outcome of its request."""
        keep_history = self.policy.uses_history
        stub_history: list[dict[str, Any]] = []
        real_history: list[dict[str, Any]] = []
        replays = []
        for turn, call, declared, binding, request in plan:
            if request is None:
                replays.append(self._unknown(turn, call, declared, stub_history, facts))
                continue  # no world saw it, so it is in neither world's history
            harness_error = None
            try:
                stub, stub_state = _split_state(stub_world.call(request))
                stub = _presented(stub, binding)
            except EnvError as exc:  # the stub could not answer (a domain fault): this call alone is lost
                stub, stub_state = _unanswered(exc), {}
                harness_error = f"stub world: {type(exc).__name__}: {exc}"
            real: Outcome | None
            real_state: dict[str, Any] = {}
            try:
                reply = real_outcome()
                if isinstance(reply, EnvError):
                    raise reply
                real, real_state = _split_state(reply)
                real = _presented(real, binding)
            except EnvError as exc:
                real = None
                harness_error = "; ".join(filter(None, (harness_error, f"{type(exc).__name__}: {exc}")))
            judged_history = len(stub_history)
            proposal_vars = context_variables(call, stub, declared, stub_history, facts, binding, stub_state)
            proposal_judgement = self.policy.judge(proposal_vars)
            proposal = _context("proposal", stub, proposal_vars, proposal_judgement)
            commit = commit_judgement = None
            if real is not None:
                commit_vars = context_variables(call, real, declared, real_history, facts, binding, real_state)
                if real.resolution is not None:
                    commit_judgement = self.policy.judge(commit_vars)
                    commit = _context("commit", real, commit_vars, commit_judgement)
                if keep_history:
                    real_history.append(_history_entry(call, commit_vars))
            if keep_history:
                stub_history.append(_history_entry(call, proposal_vars))
            replays.append(
                CallReplay(
                    key=call.key,
                    turn=turn,
                    call=call,
                    stub=stub,
                    real=real,
                    proposal=proposal,
                    commit=commit,
                    proposal_judgement=proposal_judgement,
                    commit_judgement=commit_judgement,
                    pair=(harness_error_pair(harness_error or "") if stub.error_code == UNANSWERED
                          else classify_pair(proposal, commit)),
                    recorded_match=recorded_match(call.result, stub),
                    harness_error=harness_error,
                    bound_to=binding.to if binding else None,
                    proposal_variables=proposal_vars,
                    proposal_history_len=judged_history,
                )
            )
        return replays

    def _unknown(
        self, turn: int, call: ToolCall, declared: str, history: list[dict[str, Any]], facts: dict[str, Any]
    ) -> CallReplay:
        """A call neither world can commit: no world is asked; the policy still judges the attempt."""
        outcome = Outcome(
            status="error",
            committed=False,
            error_code="unknown_tool",
            error=f"no domain or binding knows the tool {call.tool!r}",
        )
        variables = context_variables(call, outcome, declared, history, facts)
        judgement = self.policy.judge(variables)
        return CallReplay(
            key=call.key,
            turn=turn,
            call=call,
            stub=outcome,
            real=outcome,
            proposal=_context("proposal", outcome, variables, judgement),
            commit=None,
            proposal_judgement=judgement,
            commit_judgement=None,
            pair=unknown_tool_pair(call.tool),
            recorded_match=None,
        )


def _request(trajectory: Trajectory, call: ToolCall, route: "_Router",
             want_state: bool) -> tuple[str, Binding | None, dict[str, Any] | None]:
    """The declared principal, the binding and the request both worlds get for a recorded call (None for a
    tool no domain or binding knows)."""
    declared = call.principal or trajectory.principal
    binding = route.binding(call.tool)
    if binding is None and not route.knows(call.tool):
        return declared, None, None
    tool, params = (binding.to, binding.params(call.arguments)) if binding else (call.tool, call.arguments)
    request = {"tool": tool, "params": params, "principal": declared}
    if trajectory.ambient_session is not None:
        request["session"] = trajectory.ambient_session
    if call.at is not None:
        request["at"] = call.at
    if call.result is not None:
        request["recorded"] = call.result.model_dump()
    if want_state:
        request["state"] = True  # the world's view after the call comes back with its outcome
    return declared, binding, request


class _Router:
    """Which recorded tools go to a world as they are, which through a binding, and which nobody knows."""

    def __init__(self, tools: frozenset[str], bindings: Bindings):
        self.tools = tools
        self.bindings = bindings

    def binding(self, tool: str) -> Binding | None:
        return self.bindings.get(tool)

    def knows(self, tool: str) -> bool:
        return tool in self.tools


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
    return {"key": call.key, **{key: variables[key] for key in keys}}


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
