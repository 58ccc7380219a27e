"""Calls an agent makes now, each executed in a world's real twin and judged as a pair as it happens.

What a live front-end needs apart from its transport: the tools the world offers, a call's arguments checked
against its tool's schema, the call stepped through a :class:`.session.ReplaySession` (the one place calls
are judged), the real world's outcome as the tool's result, the pair written to the :class:`.pair_log.PairLog`,
and the run's summary at the end. ``serve`` puts it behind MCP.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from litmus_replay.envs import Outcome
from litmus_replay.envs.runtime import Runtime

from .live_world import LiveWorld
from .model import ToolCall
from .pair_log import PairLog
from .scoring import PairClass, revalidate_trajectory
from .session import ReplaySession
from .tool_schemas import OfferedTool, argument_problem, offered_tools

__all__ = ["INVALID_PARAMS", "LiveCalls", "RefusedCall", "tool_result"]

INVALID_PARAMS = -32602  # JSON-RPC's code for a call the server cannot take as made


class RefusedCall(Exception):
    """A call refused before any world saw it, with the JSON-RPC error it is answered with."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


class LiveCalls:
    """A world pair open for a live agent; :meth:`call` per tool call, :meth:`close` at the end."""

    def __init__(self, live: LiveWorld, log: PairLog, real_runtime: Runtime | None = None,
                 stub_runtime: Runtime | None = None):
        world = live.task_world
        self.tools: dict[str, OfferedTool] = {tool.name: tool for tool in offered_tools(world.world, world.bindings)}
        self.log = log
        self.session = ReplaySession(world.policy, world.world, principal=live.principal,
                                     ambient_session=live.ambient_session, bindings=world.bindings,
                                     stub_runtime=stub_runtime, real_runtime=real_runtime)
        self.refused = 0

    def call(self, request_id: Any, name: str, arguments: Any) -> dict[str, Any]:
        """The tool's result as a ``CallToolResult`` (JSON), the real world's outcome; raises
        :class:`RefusedCall` for arguments that do not fit the tool's schema (logged, not a call of the run)
        and for a tool nobody knows (judged and logged as a call: ``unscoreable (unknown_tool)``)."""
        arguments = {} if arguments is None else arguments
        tool = self.tools.get(name)
        if tool is not None:
            problem = argument_problem(tool, arguments)
            if problem is not None:
                error = {"code": INVALID_PARAMS, "message": f"{name}: {problem}"}
                self.log.refused(request_id, name, arguments, error)
                self.refused += 1
                raise RefusedCall(error["code"], error["message"])
        turn = len(self.session.calls) + 1
        call = ToolCall(key=f"t{turn}.c1", id=None if request_id is None else str(request_id), tool=name,
                        arguments=dict(arguments))
        replay = self.session.step(call, turn)
        if tool is None:
            offered = ", ".join(sorted(self.tools)) or "(none)"
            error = {"code": INVALID_PARAMS, "message": f"no tool {name!r} in this world; its tools are: {offered}"}
            self.log.call(request_id, name, arguments, replay.to_dict(), {"error": error})
            raise RefusedCall(error["code"], error["message"])
        if replay.real is None:  # the real world could not answer: the agent is told so, not the stub's answer
            result = {"content": [{"type": "text", "text": f"the world could not answer: {replay.harness_error}"}],
                      "isError": True}
        else:
            result = tool_result(replay.real)
        self.log.call(request_id, name, arguments, replay.to_dict(), {"result": result})
        return result

    def summary(self) -> dict[str, Any]:
        """How many calls fell in each class, how many were refused, and the run's class and finding."""
        calls = self.session.calls
        counts = Counter(call.pair.cls.value for call in calls)
        critical = {call.key: call.pair.cls for call in calls
                    if call.proposal_judgement.critical or (call.commit_judgement and call.commit_judgement.critical)}
        run = revalidate_trajectory(None, (call.pair.cls for call in calls), critical)
        return {"calls": len(calls), "refused": self.refused,
                "classes": {cls.value: counts[cls.value] for cls in PairClass},
                "revalidation": run.to_dict()}

    def close(self) -> dict[str, Any]:
        """Close the worlds; the summary, also written as the log's last line."""
        summary = self.summary()
        try:
            end = self.session.close()
            summary["reports"] = end.reports
        finally:
            self.log.close(summary)
        return summary


def tool_result(outcome: Outcome) -> dict[str, Any]:
    """A world's outcome as MCP's ``CallToolResult``: the output as text (JSON where it is not text) and,
    for an object, as structured content; a refusal or failure as an error result saying why."""
    if outcome.status == "error":
        code = f"{outcome.error_code}: " if outcome.error_code else ""
        return {"content": [{"type": "text", "text": f"{code}{outcome.error or 'the call failed'}"}], "isError": True}
    output = outcome.output
    text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, sort_keys=True, default=str)
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}], "isError": False}
    if isinstance(output, dict):
        result["structuredContent"] = output
    return result
