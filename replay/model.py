"""The trajectory model every adapter produces and the replay engine consumes.

A trajectory is one recorded run: the declared principal, the ambient session, turns of tool calls with
their recorded results, and the verdict the benchmark gave. Foreign call ids may be missing or repeated,
so every call also gets a stable positional key, ``t<turn>.c<position>`` (both 1-based).

The native on-disk format is JSONL, one trajectory per line, each carrying ``format_version``; its
JSON Schema is generated from these models (``litmus-replay schema``) and committed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticSerializationError

from .errors import TrajectoryError

FORMAT_VERSION = 1


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RecordedResult(_Model):
    """What the benchmark's harness returned for a call when the trajectory was recorded."""

    status: Literal["ok", "error"] = Field("ok", description="Whether the recorded call failed.")
    error: str | None = Field(None, description="The recorded error message or code, if it failed.")
    output: Any = Field(None, description="The recorded output (any JSON value).")


class ToolCall(_Model):
    """One proposed tool call and its recorded result."""

    key: str = Field("", description="Stable positional key t<turn>.c<position>; assigned on load.")
    id: str | None = Field(None, description="The source format's call id; may be missing or repeated.")
    tool: str = Field(..., min_length=1, description="Tool name.")
    arguments: dict[str, Any] = Field(default_factory=dict, description="Arguments as proposed.")
    result: RecordedResult | None = Field(None, description="The recorded result, if the source kept one.")
    principal: str | None = Field(
        None, min_length=1, description="Who proposed this call, when not the trajectory's principal (e.g. the user)."
    )
    at: float | None = Field(
        None, ge=0, allow_inf_nan=False, description="Recorded time of the call, in seconds, if known."
    )


class Turn(_Model):
    """One assistant turn: its text and the tool calls it proposed."""

    text: str | None = Field(None, description="Assistant text in this turn (used to spot claimed success).")
    calls: list[ToolCall] = Field(default_factory=list)


VerdictKind = Literal["proposal_time", "state_based", "unknown"]
VERDICT_KINDS: tuple[str, ...] = ("proposal_time", "state_based", "unknown")


class OriginalVerdict(_Model):
    """The verdict the benchmark recorded for the trajectory, and which moment it judged."""

    label: str = Field(..., description="The benchmark's label, e.g. tool_misuse or safe.")
    flagged_call: str | None = Field(None, description="Key or id of the call the benchmark flagged.")
    kind: VerdictKind = Field(
        "unknown",
        description="What the label judged: proposal_time (a harness judged the proposed calls), state_based (a "
        "check of the environment after the run), or unknown. Over- and under-penalised findings are made only "
        "for proposal-time verdicts.",
    )


class Source(_Model):
    """Where a trajectory came from."""

    format: str = "native"
    path: str | None = None
    run_id: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class Trajectory(_Model):
    """One recorded run of an agent against a stateful world."""

    format_version: Literal[1] = Field(FORMAT_VERSION, description="Version of this format.")
    id: str = Field(..., min_length=1)
    task: str | None = Field(None, description="The benchmark task, used to find the world.")
    principal: str = Field(..., min_length=1, description="The principal the trajectory declares it acts as.")
    ambient_session: str | None = Field(None, description="Ambient session token the harness carried, if any.")
    turns: list[Turn] = Field(default_factory=list)
    original_verdict: OriginalVerdict | None = None
    incomplete: str | None = Field(
        None, description="Why the benchmark recorded the run as ending before it finished (an error, a limit), "
                          "if it did: its calls are only those made before.")
    source: Source = Field(default_factory=Source)

    @model_validator(mode="after")
    def _assign_keys(self) -> "Trajectory":
        for turn_index, turn in enumerate(self.turns, start=1):
            for call_index, call in enumerate(turn.calls, start=1):
                call.key = f"t{turn_index}.c{call_index}"
        return self

    def calls(self) -> Iterator[tuple[int, ToolCall]]:
        """Every call in recorded order, with its 1-based turn number."""
        for turn_index, turn in enumerate(self.turns, start=1):
            for call in turn.calls:
                yield turn_index, call

    def call_count(self) -> int:
        return sum(len(turn.calls) for turn in self.turns)


_LOC_NOISE = ("function-", "inline-trajectory", "trajectory-file", "inline-bindings", "bindings-file")  # validator wrappers and union tags


def field_path(loc: Iterable[Any]) -> str:
    """Render a pydantic error location as ``turns[0].calls[1].tool``."""
    out = ""
    for part in loc:
        if isinstance(part, str) and part.startswith(_LOC_NOISE):
            continue
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = str(part).replace("\n", "\\n").replace("\r", "\\r")  # one error, one line
            out += f".{name}" if out else name
    return out or "(root)"


def first_error(exc: ValidationError) -> tuple[str, str]:
    """The first validation error as ``(field, message)``."""
    error = exc.errors()[0]
    return field_path(error["loc"]), error["msg"]


def parse_trajectory(data: Any, file: str | None = None, where: str = "") -> Trajectory:
    """Validate one trajectory dict, raising :class:`TrajectoryError` naming file and field."""
    try:
        return Trajectory.model_validate(data)
    except ValidationError as exc:
        field, message = first_error(exc)
        raise TrajectoryError(file, f"{where}{field}", message) from None


def load_jsonl(path: str | Path) -> list[Trajectory]:
    """Read a native JSONL file: one trajectory per non-blank line."""
    path = Path(path)
    trajectories = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
            except json.JSONDecodeError as exc:
                raise TrajectoryError(str(path), f"line {number}", f"not valid JSON ({exc.msg} at column {exc.colno})") from None
            trajectories.append(parse_trajectory(data, str(path), f"line {number}: "))
    return trajectories


def to_json(trajectory: Trajectory) -> str:
    """One trajectory as a line of JSON, whatever its strings hold.

    Pydantic's encoder is fast but refuses a lone surrogate (a truncated log's half emoji, valid JSON but
    not UTF-8); such a trajectory is written with the standard library's escapes instead, so it is kept
    as recorded rather than lost. :func:`from_json` reads either back.
    """
    try:
        return trajectory.model_dump_json()
    except PydanticSerializationError:
        return json.dumps(trajectory.model_dump(mode="json"), separators=(",", ":"))


def from_json(text: str) -> Trajectory:
    """A trajectory :func:`to_json` wrote (pydantic's reader first: it cannot read an escaped lone surrogate)."""
    try:
        return Trajectory.model_validate_json(text)
    except ValidationError as exc:
        if exc.errors()[0]["type"] != "json_invalid":
            raise
    return Trajectory.model_validate(json.loads(text))


def dump_jsonl(trajectories: Iterable[Trajectory], path: str | Path) -> None:
    """Write trajectories as native JSONL (atomically: a partial file never replaces a good one)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as handle:
        for trajectory in trajectories:
            handle.write(to_json(trajectory) + "\n")
    tmp.replace(path)


def json_schema() -> dict[str, Any]:
    """The JSON Schema of one line of the native format."""
    schema = Trajectory.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = f"urn:litmus-replay:trajectory:v{FORMAT_VERSION}"
    return schema
