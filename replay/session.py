"""A world pair open for one policy, judging one call at a time at both moments.

The one place a call is judged: :meth:`ReplaySession.step` sends the call to a stub world (the proposal
context: what a harness sees) and to a real world (the commit context: what the environment did), judges
both with the policy and scores the pair. A batch replay, ``run``, the near-miss generator (all through
:class:`.engine.Replayer`) and the live front-ends (``serve``) drive it.

Open loop where the calls are known: given them up front (``ahead``), the session sends the real world's
requests at once, right behind its load, so an isolated world's server works through them while the caller
builds and calls the stub world and judges; ``step`` then takes them in that order. Without ``ahead`` each
call reaches the real world when it is stepped, as a live agent makes it.

``step`` is :meth:`~ReplaySession.propose` then :meth:`~ReplaySession.commit`; a live front-end that must
act between the two moments (a proposal-time approver) calls them itself, and may
:meth:`~ReplaySession.withhold` a proposed call from the real world.

Examples
--------
>>> with ReplaySession(policy, world, principal="alice") as session:  # doctest: +SKIP
...     pair = session.step(ToolCall(tool="delete_records", arguments={"filter": "*"})).pair
...     end = session.close()
>>> pair.cls, sorted(end.reports)  # doctest: +SKIP
(<PairClass.PROPOSAL_ONLY_MISUSE: 'proposal_only_misuse'>, ['real', 'stub'])
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

from litmus_replay.envs import EnvError, Outcome
from litmus_replay.envs.runtime import Runtime, get_runtime

from .bindings import Binding, Bindings
from .call_replay import (
    UNANSWERED,
    CallReplay,
    _context,
    _history_entry,
    _presented,
    _split_state,
    _unanswered,
    context_variables,
    recorded_match,
    world_facts,
)
from .model import ToolCall
from .policy import Judgement, Policy
from .rebuilt_world import RealWorld, final_report
from .scoring import ResolutionContext, classify_pair, harness_error_pair, unknown_tool_pair
from .tools import answers_unknown_tools, world_tools

__all__ = ["Proposal", "ReplaySession", "SessionEnd", "call_request"]


@dataclass
class SessionEnd:
    """What a closed session leaves: every call's pair in order, the real world's resources before the
    first call, and each world's final domain reports, by semantics ("stub" and "real")."""

    calls: list[CallReplay]
    initial_resources: frozenset[str]
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Proposal:
    """A call made in the stub world and judged at proposal, waiting for the real world: what
    :meth:`ReplaySession.propose` gives (``done`` is the whole pair of a call no world is asked about)."""

    call: ToolCall
    turn: int
    declared: str
    binding: Binding | None
    request: dict[str, Any] | None
    stub: Outcome | None = None
    variables: dict[str, Any] | None = field(default=None, repr=False)
    judgement: Judgement | None = None
    context: ResolutionContext | None = None
    history_len: int = 0
    harness_error: str | None = None
    done: CallReplay | None = None


class Router:
    """Which recorded tools go to a world as they are, which through a binding, and which nobody knows."""

    def __init__(self, tools: frozenset[str], bindings: Bindings, answers_unknown: bool = False):
        self.tools = tools
        self.bindings = bindings
        self.answers_unknown = answers_unknown  # a domain answers tools it lacks (its benchmark refuses them)

    @classmethod
    def of(cls, world: Mapping[str, Any], bindings: Bindings | None = None) -> "Router":
        """The router of a world spec: its domains' tools, and whether one answers any other."""
        return cls(frozenset(world_tools(world)), bindings or Bindings(), answers_unknown_tools(world))

    def binding(self, tool: str) -> Binding | None:
        return self.bindings.get(tool)

    def knows(self, tool: str) -> bool:
        return tool in self.tools or self.answers_unknown


def call_request(call: ToolCall, principal: str, ambient_session: str | None, route: Router,
                 want_state: bool) -> tuple[str, Binding | None, dict[str, Any] | None]:
    """The declared principal, the binding and the request both worlds get for a call (None for a tool no
    domain or binding knows)."""
    declared = call.principal or principal
    binding = route.binding(call.tool)
    if binding is None and not route.knows(call.tool):
        return declared, None, None
    tool, params = (binding.to, binding.params(call.arguments)) if binding else (call.tool, call.arguments)
    request = {"tool": tool, "params": params, "principal": declared}
    if ambient_session is not None:
        request["session"] = ambient_session
    if call.at is not None:
        request["at"] = call.at
    if call.result is not None:
        request["recorded"] = call.result.model_dump()
    if want_state:
        request["state"] = True  # the world's view after the call comes back with its outcome
    return declared, binding, request


class ReplaySession:
    """A stub world and a real world built from one spec, each call judged in both (module docstring).

    ``principal`` is who the agent declares it acts as (a call may name its own), ``ambient_session`` the
    session token it carries; both runtimes default to in-process ones. Opening raises what opening either
    world raises, the stub world's failure first. Use it as a context manager, or call :meth:`close`.
    """

    def __init__(self, policy: Policy, world: Mapping[str, Any], *, principal: str,
                 ambient_session: str | None = None, bindings: Bindings | None = None,
                 stub_runtime: Runtime | None = None, real_runtime: Runtime | None = None,
                 ahead: Sequence[ToolCall] | None = None):
        self.policy = policy
        self.world = world
        self.principal = principal
        self.ambient_session = ambient_session
        self.calls: list[CallReplay] = []
        self._facts = world_facts(world)
        self._route = Router.of(world, bindings)
        self._want_state = policy.uses_state  # read once: each is a walk of the policy's conditions
        self._keep_history = policy.uses_history
        self._stub_history: list[dict[str, Any]] = []
        self._real_history: list[dict[str, Any]] = []
        self._end: SessionEnd | None = None
        self._shut_down = False
        self._proposed: Proposal | None = None
        self._ahead = list(ahead) if ahead is not None else None
        self._planned = [self.request(call) for call in self._ahead] if self._ahead is not None else None
        requests = (None if self._planned is None
                    else [request for *_, request in self._planned if request is not None])
        # Either way the stub world's failure is the one raised first, as when they were opened one after the other.
        self._real = RealWorld(real_runtime or get_runtime("inprocess"), world, requests)
        try:
            self._stub = (stub_runtime or get_runtime("inprocess")).open_world(world, "stub")
        except BaseException:
            self._real.cancel()
            raise
        try:
            real_world = self._real.open()
            try:
                self.initial_resources = frozenset(real_world.snapshot())
            except EnvError:  # a world lost before its first call: every call records the harness error
                self.initial_resources = frozenset()
        except BaseException:
            self._shut()
            raise

    def request(self, call: ToolCall) -> tuple[str, Binding | None, dict[str, Any] | None]:
        """What :func:`call_request` makes of a call in this session's world."""
        return call_request(call, self.principal, self.ambient_session, self._route, self._want_state)

    def knows(self, tool: str) -> bool:
        """Whether a domain or binding of this world knows the tool."""
        return self._route.knows(tool) or self._route.binding(tool) is not None

    def step(self, call: ToolCall, turn: int = 1) -> CallReplay:
        """Judge one call at both moments and score the pair; a call no domain or binding knows is scored
        ``unknown_tool`` without asking a world. With ``ahead``, the calls come in its order."""
        return self.commit(self.propose(call, turn))

    def propose(self, call: ToolCall, turn: int = 1) -> Proposal:
        """The first half of :meth:`step`: the call made in the stub world and judged at proposal, so a
        caller can act on the proposal verdict before the real world sees the call. :meth:`commit` or
        :meth:`withhold` it before proposing the next."""
        if self._shut_down:
            raise RuntimeError("this session is closed")
        if self._proposed is not None:
            raise RuntimeError(f"call {self._proposed.call.key} is proposed and neither committed nor withheld")
        if self._planned is not None:
            assert self._ahead is not None
            index = len(self.calls)
            if index >= len(self._ahead) or (self._ahead[index] is not call and self._ahead[index] != call):
                raise ValueError(f"call {call.key} is not the next of the calls given up front")
            declared, binding, request = self._planned[index]
        else:
            declared, binding, request = self.request(call)
        if request is None:
            proposal = Proposal(call, turn, declared, None, None, done=self._unknown(turn, call, declared))
        else:
            proposal = self._proposal(turn, call, declared, binding, request)
        self._proposed = proposal
        return proposal

    def commit(self, proposal: Proposal) -> CallReplay:
        """The second half of :meth:`step`: the proposed call made in the real world, judged at commit, and
        the pair scored."""
        self._take(proposal)
        if proposal.done is not None:
            replay = proposal.done
        else:
            request = proposal.request
            real_outcome: Callable[[], dict[str, Any] | EnvError] = (
                self._real.next_outcome if self._planned is not None
                else lambda: self._real.outcome_of(request))  # noqa: E731
            replay = self._committed(proposal, real_outcome)
        self.calls.append(replay)
        return replay

    def withhold(self, proposal: Proposal) -> CallReplay:
        """A proposed call the real world never sees (a proposal-time gate refused it): scored without a
        commit context, ``unscoreable (no_commit)``; it stays in the stub world's history only. Not with
        ``ahead``, whose real world has every call already."""
        if self._planned is not None:
            raise RuntimeError("a session given its calls up front commits every one")
        self._take(proposal)
        replay = proposal.done or self._replay(proposal, None, None, None, proposal.harness_error)
        self.calls.append(replay)
        return replay

    def _take(self, proposal: Proposal) -> None:
        if self._proposed is not proposal:
            raise RuntimeError(f"call {proposal.call.key} is not the call proposed last")
        self._proposed = None

    def _proposal(self, turn: int, call: ToolCall, declared: str, binding: Binding | None,
                  request: dict[str, Any]) -> Proposal:
        """The call in the stub world, judged: the proposal context."""
        stub_history = self._stub_history
        harness_error = None
        try:
            stub, stub_state = _split_state(self._stub.call(request))
            stub = _presented(stub, binding)
        except EnvError as exc:  # the stub could not answer (a domain fault): this call alone is lost
            stub, stub_state = _unanswered(exc), {}
            harness_error = f"stub world: {type(exc).__name__}: {exc}"
        judged_history = len(stub_history)
        variables = context_variables(call, stub, declared, stub_history, self._facts, binding, stub_state)
        judgement = self.policy.judge(variables)
        if self._keep_history:
            stub_history.append(_history_entry(call, variables))
        return Proposal(call, turn, declared, binding, request, stub, variables, judgement,
                        _context("proposal", stub, variables, judgement), judged_history, harness_error)

    def _committed(self, proposal: Proposal, real_outcome: Callable[[], dict[str, Any] | EnvError]) -> CallReplay:
        """The proposed call's outcome in the real world, judged, and paired with its proposal."""
        call, binding, harness_error = proposal.call, proposal.binding, proposal.harness_error
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
        commit = commit_judgement = None
        if real is not None:
            commit_vars = context_variables(call, real, proposal.declared, self._real_history, self._facts, binding,
                                            real_state)
            if real.resolution is not None:
                commit_judgement = self.policy.judge(commit_vars)
                commit = _context("commit", real, commit_vars, commit_judgement)
            if self._keep_history:
                self._real_history.append(_history_entry(call, commit_vars))
        return self._replay(proposal, real, commit, commit_judgement, harness_error)

    def _replay(self, proposal: Proposal, real: Outcome | None, commit: ResolutionContext | None,
                commit_judgement: Judgement | None, harness_error: str | None) -> CallReplay:
        call, stub = proposal.call, proposal.stub
        assert stub is not None and proposal.context is not None and proposal.judgement is not None
        return CallReplay(
            key=call.key,
            turn=proposal.turn,
            call=call,
            stub=stub,
            real=real,
            proposal=proposal.context,
            commit=commit,
            proposal_judgement=proposal.judgement,
            commit_judgement=commit_judgement,
            pair=(harness_error_pair(harness_error or "") if stub.error_code == UNANSWERED
                  else classify_pair(proposal.context, commit)),
            recorded_match=recorded_match(call.result, stub),
            harness_error=harness_error,
            bound_to=proposal.binding.to if proposal.binding else None,
            proposal_variables=proposal.variables,
            proposal_history_len=proposal.history_len,
        )

    def _unknown(self, turn: int, call: ToolCall, declared: str) -> CallReplay:
        """A call neither world can commit: no world is asked; the policy still judges the attempt. It is in
        neither world's history."""
        outcome = Outcome(
            status="error",
            committed=False,
            error_code="unknown_tool",
            error=f"no domain or binding knows the tool {call.tool!r}",
        )
        variables = context_variables(call, outcome, declared, self._stub_history, self._facts)
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

    def close(self) -> SessionEnd:
        """Both worlds' final reports, then both worlds closed; what the session leaves. Again: the same."""
        if self._end is not None:
            return self._end
        if self._shut_down:
            raise RuntimeError("this session was abandoned before it was closed")
        try:
            reports = {"stub": final_report(self._stub), "real": self._real.report()}
        finally:
            self._shut()
        self._end = SessionEnd(self.calls, self.initial_resources, reports)
        return self._end

    def _shut(self) -> None:
        """Close both worlds, the real one first, without their reports."""
        if self._shut_down:
            return
        self._shut_down = True
        try:
            self._real.close()
        finally:
            self._stub.close()

    def __enter__(self) -> "ReplaySession":
        return self

    def __exit__(self, *exc: object) -> None:
        self._shut()
