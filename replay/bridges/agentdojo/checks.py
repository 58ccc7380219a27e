"""Agreement of a replay with AgentDojo's own checks, and drift: the calls whose answer today departs
from the recording."""

from __future__ import annotations

import difflib
import itertools
import json
import re
from typing import Any

import yaml

from litmus_replay.adapters.agentdojo import is_dos_attack

from ...engine import TrajectoryReplay
from ...model import RecordedResult
from ...text_cache import remembered_by_text

CHECKS = ("utility", "security")
# What each check judges: ``security`` whether the attacker's goal was reached (True: the harm happened),
# ``utility`` whether the user's task was done.
JUDGES = {"utility": "task", "security": "harm"}


def agreement(result: TrajectoryReplay) -> dict[str, Any] | None:
    """The recorded and the replayed checks side by side; None when the run is not an AgentDojo run.

    As ``agentdojo/benchmark.py`` scores them: a run that recorded an ``error`` was skipped (its recorded
    ``utility: false, security: true`` are defaults, not checks: nothing to compare); a denial-of-service
    attack's security is ``not utility``; an unattacked run's security is true by construction."""
    extra = result.trajectory.source.extra
    report = next((r for r in (result.reports.get("real") or {}).values()
                   if isinstance(r, dict) and r.get("benchmark") == "agentdojo"), None)
    if report is None or extra.get("error"):
        return None
    replayed_checks = {name: report.get(name) for name in CHECKS if name in report}
    if is_dos_attack(extra.get("attack_type")) and isinstance(replayed_checks.get("utility"), bool):
        replayed_checks["security"] = not replayed_checks["utility"]
    checks: dict[str, Any] = {}
    for name in CHECKS:
        recorded = extra.get(name)
        if name == "security" and not extra.get("injection_task_id"):
            continue  # an unattacked run records security true by construction: nothing to compare
        if not isinstance(recorded, bool) or name not in replayed_checks:
            continue
        replayed = replayed_checks[name]
        judges = "task" if name == "security" and is_dos_attack(extra.get("attack_type")) else JUDGES[name]
        entry: dict[str, Any] = {"recorded": recorded, "replayed": replayed, "agree": replayed == recorded,
                                 "judges": judges}  # a denial of service's security is the task's failure
        if not entry["agree"]:
            entry["first_departure"], entry["explanation"] = first_departure(result, report.get(f"{name}_error"))
            entry["cause"] = "drift" if entry["first_departure"] else (
                "check_error" if report.get(f"{name}_error") else "check_changed")
            diff = departure_diff(result, entry["first_departure"])
            if diff:
                entry["diff"] = diff
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
    """The first call whose replayed answer departs from the recording in a way that can move a check, and a
    sentence saying what that means.

    The agent's calls are fixed in a replay, so a call that only reads and answers differently today changes
    nothing the checks judge by (the final state and the calls made); a departure can explain a check that
    disagrees only where the call changed the environment, or failed where it succeeded (or the reverse).
    Where every such call answered as recorded, the check itself judges differently now (AgentDojo's suites
    have been edited in place, a version's name kept); reads that answer differently are named, since the
    environment's data differs there, which a check of the model's answer may read."""
    reads: list[str] = []
    for replay in result.calls:
        recorded = replay.call.result
        real = replay.real
        if recorded is None or real is None or not departs(recorded, real.status, real.output, real.error):
            continue
        flipped = (recorded.status == "error") != (real.status == "error")
        effects = real.effects
        if not flipped and not (effects.created or effects.changed or effects.deleted):
            reads.append(replay.key)
            continue
        said, got = _answer(recorded.status, recorded.output, recorded.error), _answer(real.status, real.output, real.error)
        lines = _changed_lines(said, got)
        if lines:
            before, after = lines
            what = f"where the run recorded {_preview(before)!r} it now answers {_preview(after)!r}"
        else:
            what = "its answer differs in layout only"
        return replay.key, (f"{replay.key} {replay.call.tool}: {what} (the benchmark's environment has "
                            f"drifted since the run)")
    if check_error:
        return None, f"the check failed on the replayed state: {check_error}"
    also = (f" (calls that only read answer differently — {', '.join(reads[:3])}: the environment's data differs "
            "there, which a check of the answer may read)") if reads else ""
    return None, ("every call that changed the environment answered as recorded: the check itself judges "
                  "differently today than when the run was scored (AgentDojo's code has changed since, under this "
                  f"version's name or another){also}")


def departure_diff(result: TrajectoryReplay, key: str | None, limit: int = 12) -> list[str]:
    """A unified diff (no context) of the recorded and the replayed answer of call ``key``, at most ``limit``
    lines. A clock's time (what AgentDojo stamps with ``datetime.now()``) is ``<now>`` on both sides: it
    departs from nothing (see :func:`departs`), and a diff holding today's time would make a batch's
    outputs differ from one run of it to the next."""
    replay = next((call for call in result.calls if call.key == key), None)
    if replay is None or replay.call.result is None or replay.real is None:
        return []
    recorded, real = replay.call.result, replay.real
    said = _CLOCK.sub("<now>", _answer(recorded.status, recorded.output, recorded.error))
    got = _CLOCK.sub("<now>", _answer(real.status, real.output, real.error))
    diff = difflib.unified_diff(said.splitlines(), got.splitlines(), "recorded", "replayed", n=0, lineterm="")
    lines = [line if len(line) <= 240 else line[:239] + "…" for line in itertools.islice(diff, limit + 1)]
    return lines[:limit] + (["…"] if len(lines) > limit else [])


def departs(recorded: RecordedResult, status: str, output: Any, error: str | None) -> bool:
    """Whether a replayed answer departs from the recorded one: failed where it succeeded (or the reverse),
    or an output with other content.

    What the environment did not decide is left out: two failures are alike (their wording follows the
    installed libraries: pydantic's messages and links, a ``TypeError`` become a ``ValidationError``); a time
    with microseconds is the clock's (AgentDojo stamps what a call creates with ``datetime.now()``); how
    numbers and white space are printed; and what a defended pipeline showed the agent instead of the
    tool's answer (spotlighting's ``<<`` ``>>`` around it, a prompt-injection detector's "Data omitted")."""
    if (recorded.status == "error") != (status == "error"):
        return True
    if recorded.status == "error" or recorded.output is None:
        return False
    said = str(recorded.output)
    answered = str(output if output is not None else "")
    if said == answered or _DEFENCE_OMITTED in said:  # most answers are the recorded text itself
        return False
    return _steady(said) != _steady(answered) and _unordered(said) != _unordered(answered)


@remembered_by_text(256)
def _unordered(text: str) -> Any:
    """The answer's YAML with every list of scalars as a sorted list, or the text where it is not YAML
    (remembered: many runs record the same answers; the value is only compared, never changed).

    Some of AgentDojo's tools build a list from a set (an event's participants), so its order follows the
    process's string hashing, in the recording as in the replay: an order that differs is no departure."""
    text = _WHOLE_FLOAT.sub(r"\1", _CLOCK.sub("<now>", _undelimited(text)))
    try:
        value = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError:
        return text
    return _sorted_scalar_lists(value)


def _sorted_scalar_lists(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(key): _sorted_scalar_lists(item) for key, item in value.items()}
    if isinstance(value, list):
        items = [_sorted_scalar_lists(item) for item in value]
        if all(not isinstance(item, (dict, list)) for item in items):
            return sorted(items, key=lambda item: (type(item).__name__, str(item)))
        return items
    return value


_CLOCK = re.compile(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d\.\d{1,6}")
_WHOLE_FLOAT = re.compile(r"(?<![\d.])(\d+)\.0(?![\d.])")
_SPACES = re.compile(r"\s+")
_DEFENCE_OMITTED = "<Data omitted because a prompt injection was detected>"
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@remembered_by_text(512)
def _steady(text: str) -> str:
    """The text as the environment decided it (see :func:`departs`); remembered, as :func:`_unordered` is."""
    text = _CLOCK.sub("<now>", _undelimited(text))
    text = _WHOLE_FLOAT.sub(r"\1", text)
    return _SPACES.sub(" ", text).strip()


def _undelimited(text: str) -> str:
    """The answer without spotlighting's delimiters, which the pipeline put around it (the end may have
    been cut)."""
    text = text.strip()
    return text[2:].removesuffix(">>") if text.startswith("<<") else text


def _answer(status: str, output: Any, error: str | None) -> str:
    if status == "error":
        return error or ""
    return output if isinstance(output, str) else json.dumps(output)


def _changed_lines(said: str, got: str) -> tuple[str, str] | None:
    """The first pair of lines that differ (clock times aside), as the diff shows them."""
    matcher = difflib.SequenceMatcher(None, said.splitlines(), got.splitlines(), autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        before = "\n".join(said.splitlines()[i1:i2]).strip()
        after = "\n".join(got.splitlines()[j1:j2]).strip()
        if _steady(before) != _steady(after):
            return before, after
    return None


def _preview(value: str, limit: int = 120) -> str:
    return value if len(value) <= limit else value[: limit - 1] + "…"
