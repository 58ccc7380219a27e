"""What every adapter does the same way: collect turns and calls, pair results, build the trajectory.

Results are paired with the calls they answer by id, first pending call first, because real logs repeat
ids (tau-bench) or leave them null (AgentDojo with local models); a result without an id answers the
oldest pending call. Positional keys (``t<turn>.c<position>``) are what the rest of the tool uses.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from typing import Any, Callable

from pydantic import ValidationError

from litmus_replay.replay.errors import AdapterError
from litmus_replay.replay.model import OriginalVerdict, Trajectory, first_error

from ._doc import Doc, kind, one_line

# Foreign formats do not declare who the agent acts as; this stands in until a scenario says otherwise.
DEFAULT_PRINCIPAL = "agent"

_TEXT_BLOCKS = (None, "text", "input_text", "output_text")


def text_of(doc: Doc | None) -> str | None:
    """The text of a message content: a string, null, or a list of blocks.

    Blocks are ``{type: text|input_text|output_text, text}`` (OpenAI, Anthropic, inspect) or AgentDojo's
    ``{type: text, content}``; other blocks (images, thinking, tool use) carry no text and are skipped.
    """
    if doc is None:
        return None
    if isinstance(doc.value, str):
        return doc.value
    parts: list[str] = []
    for block in doc.elements():
        if isinstance(block.value, str):
            parts.append(block.value)
            continue
        block.as_dict()
        block_type = block.str_at("type")
        if block_type not in _TEXT_BLOCKS:
            continue
        if block.has("text"):
            parts.append(block.need("text").as_str())
        elif block.has("content") and block_type is not None:
            parts.append(block.need("content").as_str())
        elif block_type is not None:
            block.fail("a text block needs a 'text' field")
    return "\n".join(parts) if parts else None


def arguments_of(doc: Doc | None) -> tuple[dict[str, Any], str | None]:
    """Arguments as proposed, and the raw text when the model's JSON string does not hold an object.

    Formats record arguments either as an object or as a JSON string (OpenAI). A string that is not a
    JSON object is what the model emitted, not a malformed log: the call keeps empty arguments and the
    raw text is reported in ``Source.extra["unparsed_arguments"]``.
    """
    if doc is None:
        return {}, None
    if isinstance(doc.value, dict):
        return doc.value, None
    if isinstance(doc.value, str):
        if not doc.value.strip():
            return {}, None
        try:
            parsed = json.loads(doc.value)
        except (ValueError, RecursionError):
            return {}, doc.value
        return (parsed, None) if isinstance(parsed, dict) else ({}, doc.value)
    doc.fail(f"expected an object or a JSON string, got {kind(doc.value)}")


def ok(output: Any = None) -> dict[str, Any]:
    return {"status": "ok", "error": None, "output": output}


def error(message: str | None, output: Any = None) -> dict[str, Any]:
    return {"status": "error", "error": message or "error (no message recorded)", "output": output}


DEFAULT_ERROR_PREFIXES: tuple[str, ...] = ("Error:",)


def text_result(text: str | None, error_prefixes: tuple[str, ...] = DEFAULT_ERROR_PREFIXES) -> dict[str, Any]:
    """A tool result from a format with no error flag: an error when its text starts with one of the
    benchmark's error prefixes (``Error:`` by default, as tau-bench and most harnesses write), its
    message the text after the prefix; else ok. An empty ``error_prefixes`` reads every result as ok."""
    if text is not None:
        stripped = text.lstrip()
        for prefix in error_prefixes:
            if prefix and stripped.startswith(prefix):
                return error(stripped[len(prefix) :].strip() or stripped, text)
    return ok(text)


def iso_seconds(value: Any) -> float | None:
    """Seconds since the epoch of an ISO-8601 timestamp (naive means UTC); None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def pass_fail(reward: float) -> str:
    """tau-bench and tau2 count a task solved when its reward is 1 (within float noise)."""
    return "pass" if abs(reward - 1.0) <= 1e-6 else "fail"


NAN_LABEL = "NaN"


def reward_label(reward: float | None) -> str | None:
    """The verdict of a tau-bench or tau2 reward: ``pass`` or ``fail``, and ``NaN`` for a NaN reward, which
    the benchmarks write when they could not grade the run, so it is never a fail; none without a reward."""
    if reward is None:
        return None
    return NAN_LABEL if math.isnan(reward) else pass_fail(reward)


def reward_value(reward: float | None) -> float | str | None:
    """The reward as ``Source.extra`` keeps it: JSON holds no NaN (kept as its label) and no infinity (none)."""
    if reward is None or math.isinf(reward):
        return None
    return NAN_LABEL if math.isnan(reward) else reward


def recorded_error(value: Any) -> str | None:
    """How a run the benchmark saw raise is marked ``incomplete``: ``error: <its message>``; None when the
    benchmark recorded no error (a null, an empty string)."""
    return f"error: {one_line(value)}" if isinstance(value, str) and value.strip() else None


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def verdict(label: str | None) -> OriginalVerdict | None:
    return OriginalVerdict(label=label) if label else None


class Builder:
    """Turns and calls of one trajectory, in recorded order, with results paired as they arrive."""

    def __init__(self) -> None:
        self.turns: list[dict[str, Any]] = []
        self._pending: list[dict[str, Any]] = []
        self.unpaired_results = 0
        self.unparsed: dict[str, str] = {}
        self.unread: dict[str, int] = {}

    def turn(self, text: str | None = None) -> None:
        self.turns.append({"text": text, "calls": []})

    def add_text(self, text: str | None) -> None:
        """More assistant text for the current turn (a turn may hold several text items)."""
        if not text:
            return
        if not self.turns:
            self.turn()
        before = self.turns[-1]["text"]
        self.turns[-1]["text"] = f"{before}\n{text}" if before else text

    def call(
        self,
        tool: str,
        arguments: Doc | None,
        call_id: str | None = None,
        at: float | None = None,
        principal: str | None = None,
        result: dict[str, Any] | None = None,
    ) -> str:
        """Add a call to the current turn (a new one if none); returns its positional key."""
        if not self.turns:
            self.turn()
        args, raw = arguments_of(arguments)
        turn = self.turns[-1]
        if at is not None and not (math.isfinite(at) and at >= 0):
            at = None  # a recorded time before 1970 or out of range is no time at all
        call = {"id": call_id, "tool": tool, "arguments": args, "result": result, "at": at}
        if principal is not None:
            call["principal"] = principal
        turn["calls"].append(call)
        key = f"t{len(self.turns)}.c{len(turn['calls'])}"
        if raw is not None:
            self.unparsed[key] = raw
        if result is None:
            self._pending.append(call)
        return key

    def result(self, call_id: str | None, result: dict[str, Any]) -> bool:
        """Attach a result to the first pending call with this id; False when it answers none."""
        index = self._match(call_id)
        if index is None:
            self.unpaired_results += 1
            return False
        self._pending.pop(index)["result"] = result
        return True

    def _match(self, call_id: str | None) -> int | None:
        """Same id first; else the oldest pending call (without an id, when the result names one)."""
        if call_id is not None:
            for index, call in enumerate(self._pending):
                if call["id"] == call_id:
                    return index
        for index, call in enumerate(self._pending):
            if call_id is None or call["id"] is None:
                return index
        return None

    def skip(self, kind: str) -> None:
        """A block that looks like a call but cannot be read as one: counted, so that it is not lost unseen."""
        self.unread[kind] = self.unread.get(kind, 0) + 1

    def call_count(self) -> int:
        return sum(len(turn["calls"]) for turn in self.turns)

    def notes(self) -> dict[str, Any]:
        """What the adapter could not map exactly, for ``Source.extra``."""
        out: dict[str, Any] = {}
        if self.unparsed:
            out["unparsed_arguments"] = dict(self.unparsed)
        if self.unpaired_results:
            out["unpaired_results"] = self.unpaired_results
        if self.unread:
            out["unread_blocks"] = dict(self.unread)
        return out

    def build(
        self,
        file: str,
        field: str,
        *,
        trajectory_id: str,
        source_format: str,
        principal: str = DEFAULT_PRINCIPAL,
        task: str | None = None,
        original: OriginalVerdict | None = None,
        run_id: str | None = None,
        extra: dict[str, Any] | None = None,
        incomplete: str | None = None,
    ) -> Trajectory:
        data = {
            "id": trajectory_id or "(no id)",
            "task": task,
            "principal": principal or DEFAULT_PRINCIPAL,
            "turns": self.turns,
            "original_verdict": original.model_dump() if original else None,
            "incomplete": incomplete,
            "source": {
                "format": source_format,
                "path": file,
                "run_id": run_id,
                "extra": {**(extra or {}), **self.notes()},
            },
        }
        try:
            return Trajectory.model_validate(data)
        except ValidationError as exc:
            where, message = first_error(exc)
            raise AdapterError(file, f"{field} ({where})", one_line(message)) from None


def task_key(benchmark: str, *levels: str | None) -> str | None:
    """A run's task qualified by benchmark and suite: ``agentdojo/workspace/user_task_0``.

    Benchmarks reuse task names across suites, so worlds are found by the whole key, most specific level
    first (see ``replay.worlds``). Missing levels are left out; with no task at all there is no key.
    """
    if not levels or levels[-1] in (None, ""):
        return None
    return "/".join([benchmark, *(str(level) for level in levels if level not in (None, ""))])


def require_calls(trajectories: list[Trajectory], file: str, field: str, detail: str = "") -> list[Trajectory]:
    """A file that holds no run has nothing to replay: say so. A run in which the agent made no tool call is
    still a run (its verdict stands, and the batch counts it), so it is returned as it is."""
    if not trajectories:
        suffix = f" ({detail})" if detail else ""
        raise AdapterError(file, field, one_line(f"holds no tool call{suffix}; nothing to replay"))
    return trajectories


def user_texts(messages: Doc) -> list[str]:
    """The text of every ``role: user`` message, in order: what the user asked for, which a value the agent
    passes may come from (the invented-argument detector and a bridge's version inference read it)."""
    texts = []
    for message in messages.elements():
        if isinstance(message.value, dict) and message.value.get("role") == "user":
            text = text_of(message.opt("content"))
            if text:
                texts.append(text)
    return texts


def walk_chat_messages(
    messages: Doc, builder: "Builder", arguments_key: str, result_of: Callable[[Doc, str | None], dict[str, Any]]
) -> None:
    """The role-tagged message lists AgentDojo and inspect_ai both log: an assistant message is a turn
    with its ``tool_calls``; a ``tool`` message answers its ``tool_call_id``. The formats differ only in
    where the arguments sit and how a failure is marked, which the caller supplies."""
    for message in messages.elements():
        role = message.need("role").as_str()
        if role == "assistant":
            builder.turn(text_of(message.opt("content")))
            calls = message.opt("tool_calls")
            for call in calls.elements() if calls is not None else ():
                builder.call(call.need("function").as_name(), call.opt(arguments_key), call.id_at("id"))
        elif role == "tool":
            builder.result(message.id_at("tool_call_id"), result_of(message, text_of(message.opt("content"))))
