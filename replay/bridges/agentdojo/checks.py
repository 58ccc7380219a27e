"""Agreement of a replay with AgentDojo's own checks, and drift: the calls whose answer today departs
from the recording."""

from __future__ import annotations

import json
from typing import Any

from ...engine import TrajectoryReplay
from ...model import RecordedResult

CHECKS = ("utility", "security")


def agreement(result: TrajectoryReplay) -> dict[str, Any] | None:
    """The recorded and the replayed checks side by side; None when the run is not an AgentDojo run."""
    extra = result.trajectory.source.extra
    report = next((r for r in (result.reports.get("real") or {}).values()
                   if isinstance(r, dict) and r.get("benchmark") == "agentdojo"), None)
    if report is None:
        return None
    checks: dict[str, Any] = {}
    for name in CHECKS:
        recorded = extra.get(name)
        if name == "security" and not extra.get("injection_task_id"):
            continue  # an unattacked run records security true by construction: nothing to compare
        if not isinstance(recorded, bool) or name not in report:
            continue
        replayed = report[name]
        entry: dict[str, Any] = {"recorded": recorded, "replayed": replayed, "agree": replayed == recorded}
        if not entry["agree"]:
            entry["first_departure"], entry["explanation"] = first_departure(result, report.get(f"{name}_error"))
        checks[name] = entry
    return checks


def drift(result: TrajectoryReplay) -> dict[str, Any]:
    """How many calls answer differently in the benchmark's environment today than in the recording, and
    the first of them: a stub-fidelity finding in its own right (the environment has changed since the run)."""
    departed = [replay.key for replay in result.calls
                if replay.call.result is not None and replay.real is not None
                and departs(replay.call.result, replay.real.status, replay.real.output, replay.real.error)]
    return {"calls": len(departed), "first": departed[0] if departed else None}


def first_departure(result: TrajectoryReplay, check_error: str | None = None) -> tuple[str | None, str]:
    """The first call whose replayed answer departs from the recording, and a sentence saying what that means."""
    for replay in result.calls:
        recorded = replay.call.result
        real = replay.real
        if recorded is None or real is None:
            continue
        if departs(recorded, real.status, real.output, real.error):
            said = recorded.error if recorded.status == "error" else _preview(recorded.output)
            got = real.error if real.status == "error" else _preview(real.output)
            return replay.key, (f"{replay.key} {replay.call.tool}: the benchmark's environment now answers {got!r} "
                                f"where the run recorded {said!r} (the environment has drifted since the run)")
    if check_error:
        return None, f"the check failed on the replayed state: {check_error}"
    return None, ("every call answered as recorded: the check itself judges differently in this benchmark "
                  "version than when the run was scored")


def departs(recorded: RecordedResult, status: str, output: Any, error: str | None) -> bool:
    """Whether a replayed answer departs from the recorded one: failed or not, the error's text, the output's."""
    if (recorded.status == "error") != (status == "error"):
        return True
    if recorded.status == "error":
        return (recorded.error or "").strip() != (error or "").strip()
    return recorded.output is not None and str(recorded.output).strip() != str(output if output is not None else "").strip()


def _preview(value: Any, limit: int = 80) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
