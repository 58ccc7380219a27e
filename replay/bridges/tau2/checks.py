"""Agreement of a replay with τ²-bench's own evaluation, component by component, and drift: the calls whose
answer today departs from the recording.

τ²'s reward is the product of the components its task's ``reward_basis`` names: the database check
(``DB``), the environment assertions (``ENV_ASSERTION``), the action checks (``ACTION``), the
communicate checks (``COMMUNICATE``) and the natural-language assertions (``NL_ASSERTION``). The first
three are re-checked on the replayed environment; the last two read the agent's messages (or ask a model)
and are taken from the recording, said so in the reward's ``not_rechecked``.

The action checks match calls by name and arguments whether or not the environment refused them: an
action credited by a call τ²'s environment refused is a *proposal-time credit*, listed on the ``actions``
check (``proposal_time_credits``) beside the recorded reward.
"""

from __future__ import annotations

import difflib
import itertools
import json
from typing import Any

from ...engine import TrajectoryReplay
from ...model import RecordedResult

BENCHMARK = "tau2-bench"
RECHECKED = {"DB": "db", "ENV_ASSERTION": "env_assertions", "ACTION": "actions"}
NOT_RECHECKED = {"COMMUNICATE": "communicate_checks", "NL_ASSERTION": "nl_assertions"}


def agreement(result: TrajectoryReplay) -> dict[str, Any] | None:
    """The recorded and the replayed reward and its components side by side; None when the run is not a
    τ²-bench run, or was cut short (τ² evaluated nothing: its reward 0 is no verdict)."""
    trajectory = result.trajectory
    extra = trajectory.source.extra
    report = next((r for r in (result.reports.get("real") or {}).values()
                   if isinstance(r, dict) and r.get("benchmark") == BENCHMARK), None)
    if report is None or trajectory.incomplete or "reward_basis" not in report:
        return None
    recorded = extra.get("reward_checks") or {}
    seen = _seen(result)
    checks: dict[str, Any] = {}

    db = report.get("db") or {}
    if isinstance(recorded.get("db_match"), bool):
        checks["db"] = _entry(result, recorded["db_match"], db.get("match"),
                              {"records": db["records"]} if db.get("records") else {})
    replayed_assertions = report.get("env_assertions") or []
    if isinstance(recorded.get("env_assertions"), list):
        checks["env_assertions"] = _entry(result, [met for _, met in recorded["env_assertions"]],
                                          [met for _, met in replayed_assertions])
    replayed_actions = report.get("actions") or []
    if isinstance(recorded.get("action_checks"), list):
        credits = [{"action": action["id"], "call": seen[action["call"]] if action["call"] < len(seen) else None}
                   for action in replayed_actions if action.get("refused")]
        more = {"proposal_time_credits": credits} if credits else {}
        checks["actions"] = _entry(result, [[name, met] for name, met in recorded["action_checks"]],
                                   [[action["id"], action["match"]] for action in replayed_actions], more)

    components = {"db": 1.0 if db.get("match") else 0.0,
                  "env_assertions": 1.0 if all(met for _, met in replayed_assertions) else 0.0,
                  "actions": 1.0 if all(action["match"] for action in replayed_actions) else 0.0}
    breakdown = recorded.get("reward_breakdown") or {}
    reward, not_rechecked = 1.0, {}
    for basis in report["reward_basis"]:
        if basis in RECHECKED:
            reward *= components[RECHECKED[basis]]
        else:
            value = breakdown.get(basis)
            not_rechecked[NOT_RECHECKED.get(basis, basis)] = value
            reward *= value if isinstance(value, (int, float)) else 1.0
    recorded_reward = extra.get("reward")
    if isinstance(recorded_reward, (int, float)) and not isinstance(recorded_reward, bool):
        more: dict[str, Any] = {"not_rechecked": not_rechecked} if not_rechecked else {}
        # the calls that make one of the task's own expected actions: a rule that forbids one says the
        # task contradicts its policy, whatever the agent did
        expected = [seen[action["call"]] for action in replayed_actions
                    if action.get("match") and isinstance(action.get("call"), int) and action["call"] < len(seen)]
        if expected:
            more["expected_calls"] = list(dict.fromkeys(expected))
        checks["reward"] = _entry(result, float(recorded_reward), reward, more, judges="conduct")
    return checks


def _entry(result: TrajectoryReplay, recorded: Any, replayed: Any, more: dict[str, Any] | None = None,
           judges: str = "task") -> dict[str, Any]:
    """One check side by side. The reward ``judges`` the agent's ``conduct``: τ²'s policy says what the agent
    may do, and a reward of 1 says it did the task within it; its components judge the task."""
    entry: dict[str, Any] = {"recorded": recorded, "replayed": replayed, "agree": recorded == replayed,
                             "judges": judges, **(more or {})}
    if not entry["agree"]:
        entry["first_departure"], entry["explanation"] = first_departure(result)
        entry["cause"] = "drift" if entry["first_departure"] else "check_changed"
        diff = departure_diff(result, entry["first_departure"])
        if diff:
            entry["diff"] = diff
    return entry


def _seen(result: TrajectoryReplay) -> list[str]:
    """The keys of the calls τ²'s environment was given, in order (the domain's report counts them so)."""
    return [call.key for call in result.calls if call.real is not None and not call.unknown_tool]


def drift(result: TrajectoryReplay) -> dict[str, Any]:
    """How many calls answer differently in τ²'s environment today than in the recording, and the first."""
    departed = [call.key for call in result.calls if _departed(call)]
    return {"calls": len(departed), "first": departed[0] if departed else None}


def _departed(call: Any) -> bool:
    return (call.call.result is not None and call.real is not None and not call.unknown_tool
            and departs(call.call.result, call.real.status, call.real.output, call.real.error))


def departs(recorded: RecordedResult, status: str, output: Any, error: str | None) -> bool:
    """Whether a replayed answer departs from the recorded one as τ² compares them when it rebuilds an
    environment from a run (``Environment.set_state``): failed where it succeeded (or the reverse), or
    another content, each parsed as JSON where it is JSON. Two failures compare by their message."""
    if (recorded.status == "error") != (status == "error"):
        return True
    if recorded.status == "error":
        return _parsed(recorded.error) != _parsed(error)
    return _parsed(recorded.output) != _parsed(output)


def _parsed(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def first_departure(result: TrajectoryReplay) -> tuple[str | None, str]:
    """The first call whose replayed answer departs from the recording, and a sentence saying what it did."""
    for call in result.calls:
        if not _departed(call):
            continue
        said = _answer(call.call.result.status, call.call.result.output, call.call.result.error)
        got = _answer(call.real.status, call.real.output, call.real.error)
        return call.key, (f"{call.key} {call.call.tool}: where the run recorded {_preview(said)!r} it now answers "
                          f"{_preview(got)!r} (τ²-bench's environment answers differently than when the run was made)")
    return None, ("every call answered as recorded: τ²-bench's check itself judges differently in the installed "
                  "version than when the run was scored")


def departure_diff(result: TrajectoryReplay, key: str | None, limit: int = 12) -> list[str]:
    """A unified diff (no context) of the recorded and the replayed answer of call ``key``."""
    call = next((call for call in result.calls if call.key == key), None)
    if call is None or call.call.result is None or call.real is None:
        return []
    said = _answer(call.call.result.status, call.call.result.output, call.call.result.error)
    got = _answer(call.real.status, call.real.output, call.real.error)
    diff = difflib.unified_diff(_lines(said), _lines(got), "recorded", "replayed", n=0, lineterm="")
    lines = [line if len(line) <= 240 else line[:239] + "…" for line in itertools.islice(diff, limit + 1)]
    return lines[:limit] + (["…"] if len(lines) > limit else [])


def _lines(text: str) -> list[str]:
    """An answer's lines, a JSON answer pretty-printed so that a diff shows the field that moved."""
    parsed = _parsed(text)
    if isinstance(parsed, (dict, list)):
        return json.dumps(parsed, indent=1, sort_keys=True).splitlines()
    return text.splitlines()


def _answer(status: str, output: Any, error: str | None) -> str:
    if status == "error":
        return f"Error: {error or ''}"
    return output if isinstance(output, str) else json.dumps(output)


def _preview(value: str, limit: int = 120) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"
