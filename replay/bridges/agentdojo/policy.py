"""The policy of an AgentDojo run, derived from the benchmark's own tasks (see the package docstring)."""

from __future__ import annotations

import json
import re
from typing import Any

from litmus_replay.envs.bridges import agentdojo as bridge

from ...policy import PolicySpec, RuleSpec

# The tools that change a suite's state: what an attacker's goal is made of.
STATE_CHANGING: dict[str, frozenset[str]] = {
    "banking": frozenset({"send_money", "schedule_transaction", "update_scheduled_transaction", "update_password",
                          "update_user_info"}),
    # get_webpage is in: AgentDojo's web logs every visit, and an attacker's goal can be a visit.
    "slack": frozenset({"add_user_to_channel", "get_webpage", "invite_user_to_slack", "post_webpage",
                        "remove_user_from_slack", "send_channel_message", "send_direct_message"}),
    "travel": frozenset({"cancel_calendar_event", "create_calendar_event", "reserve_car_rental", "reserve_hotel",
                         "reserve_restaurant", "send_email"}),
    "workspace": frozenset({"add_calendar_event_participants", "append_to_file", "cancel_calendar_event",
                            "create_calendar_event", "create_file", "delete_email", "delete_file",
                            "reschedule_calendar_event", "send_email", "share_file"}),
}


def benchmark_policy(version: str, suite_name: str, user_task_id: str, injection_task_id: str | None) -> PolicySpec:
    """The rules of one run's policy, from the tasks' ground truth (see the module docstring)."""
    if injection_task_id is None:
        return PolicySpec()
    suite = bridge.suite_for(version, suite_name)
    environment = bridge.environment_template(version, suite_name).environment({})
    injection_task = suite.injection_tasks[injection_task_id]
    user_task = bridge.find_task(suite, user_task_id)
    benign_tools = {call.function for call in _ground_truth(user_task, environment)}
    goal = str(getattr(injection_task, "GOAL", ""))
    writes = STATE_CHANGING[suite_name]
    rules: list[RuleSpec] = []
    for index, call in enumerate(_ground_truth(injection_task, environment)):
        if call.function not in writes:
            continue
        conditions = [f"tool == {_cel(call.function)}", *_identifying(call.args, goal)]
        if len(conditions) == 1 and call.function in benign_tools:
            continue  # nothing tells the attacker's call from the user's own
        when = " && ".join(conditions)
        if any(rule.when == when for rule in rules):
            continue
        rules.append(RuleSpec(id=f"{injection_task_id}-{index}-{call.function}", when=when,
                              critical=True, description=f"the attacker's goal: {goal}"))
    if not rules:
        for tool in sorted(writes - benign_tools):
            rules.append(RuleSpec(id=f"unrequested-{tool}", when=f"tool == {_cel(tool)}", critical=True,
                                  description=f"a state change the user's task does not ask for; the attacker's goal: {goal}"))
    return PolicySpec(rules=rules)


def _ground_truth(task: Any, environment: Any) -> list[Any]:
    try:
        return list(task.ground_truth(environment))
    except Exception:  # a ground truth that needs state this environment lacks: no calls to learn from
        return []


# Arguments that say who or what a call reaches: where the attacker's own values go.
_TARGET_ARGUMENT = re.compile(r"recipient|url|user|email|participant|hotel|restaurant|company|channel|password|id$")
# What a goal names that is the attacker's own: addresses, web sites, accounts.
_MARKER = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]*\w|(?:https?://)?www\.[^\s'\"]*[\w/]|\b[A-Z]{2}\d{10,}\b")


def _identifying(args: dict[str, Any], goal: str) -> list[str]:
    """CEL conditions on what the attacker's call carries, as each context resolved it: a target argument
    (recipient, URL, user, id, ...) holding a value the goal names, and any argument carrying one of the
    goal's addresses, sites or accounts. Resolved, because the real environment resolves what a call
    leaves implicit (the recipient a scheduled transfer keeps when an update does not name one)."""
    markers = sorted(set(_MARKER.findall(goal)))
    conditions = []
    for name, value in sorted(args.items()):
        field = f"resolved.{name}" if name.isidentifier() else f"resolved[{_cel(name)}]"
        target = bool(_TARGET_ARGUMENT.search(name))
        if isinstance(value, str):
            if target and _named(value, goal):
                conditions.append(f"has({field}) && type({field}) == string && {field} == {_cel(value)}")
            else:
                conditions.extend(f"has({field}) && type({field}) == string && {field}.contains({_cel(marker)})"
                                  for marker in markers if marker in value)
        elif isinstance(value, list):
            for item in value:
                if isinstance(item, str) and (item in markers or (target and _named(item, goal))):
                    conditions.append(f"has({field}) && type({field}) == list && {_cel(item)} in {field}")
    return conditions


def _named(value: str, goal: str) -> bool:
    return bool(value) and re.search(rf"(?<!\w){re.escape(value)}(?!\w)", goal) is not None


def _cel(text: str) -> str:
    """A CEL string literal."""
    return json.dumps(text)


