"""The shapes of a ``revalidate`` batch's outputs: one line of ``results.jsonl`` and ``summary.json``.

Both are pydantic models, so what a line may hold is stated once, with its JSON Schema shipped in
``replay/schemas/`` (``litmus-replay schema results-line``, ``schema summary``) and checked against the
models by a test. Readers that take lines back (resume, the summary, the index, ``report``) read them
through :func:`read_line`, so a line that does not fit is refused in one place. The line's fields are
optional beyond the first six because a line says only what its status knows: a file no adapter read
has no trajectory, a run without a world has no class.
"""

from __future__ import annotations

import json
from typing import Any, Literal, Mapping

from pydantic import BaseModel, ConfigDict, Field

from ..report.schema import model_schema, shipped_schema

__all__ = ["NO_TOOL_CALLS", "RESULT_LINE_VERSION", "SUMMARY_VERSION", "BatchSummary", "ResultLine", "as_line",
           "committed_schema", "line_json", "read_line", "schema", "schema_text", "SCHEMAS"]

RESULT_LINE_VERSION = 1
SUMMARY_VERSION = 1
NO_TOOL_CALLS = "no_tool_calls"  # a run in which the agent called no tool: a result of its own
Status = Literal["ok", "input_error", "missing_world", "harness_error", "no_tool_calls"]


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Disagreement(_Closed):
    """Two of the run's judgements that disagree (see :mod:`.verdicts`)."""

    kind: str = Field(..., description="The finding this disagreement makes (over_penalised, check_missed_harm, ...).")
    between: list[Literal["recorded", "check", "effects"]]
    sentence: str
    call: str | None = Field(None, description="The call it turns on, by key (t3.c1).")


class Decisive(_Closed):
    """The call that decides the run's finding, and the policy rule that judged it."""

    call: str
    tool: str
    rule: str | None = None


class Check(BaseModel):
    """One of the benchmark's own checks, recorded against replayed (a bridge adds what it knows)."""

    model_config = ConfigDict(extra="allow")
    agree: bool
    recorded: Any = None
    replayed: Any = None
    judges: str | None = Field(None, description="What the check judges: the task, harm, or the agent's conduct (the task done within the rules).")


class Drift(_Closed):
    """The calls whose answer in the benchmark's environment today departs from the recording."""

    calls: int = Field(..., ge=0)
    first: str | None = None


class ResultLine(_Closed):
    """One run's result, as one line of ``results.jsonl``."""

    run: str = Field(..., description="The run's id in this batch (its trajectory id where unique, else where it sits).")
    file: str = Field(..., description="The run file it was read from.")
    trajectory: str | None = Field(..., description="The trajectory's own id (null for a file no adapter read).")
    task: str | None = Field(..., description="The task key its world was looked up by.")
    original: str | None = Field(..., description="The verdict the benchmark recorded (null where none).")
    status: Status
    incomplete: str | None = Field(None, description="Why the benchmark recorded the run as cut short.")
    error: str | None = Field(None, description="Why the run was not re-validated (every status but ok and no_tool_calls).")
    revalidated: str | None = Field(None, description="The run's pair class (see the pair classes).")
    finding: str | None = Field(None, description="Which of the run's judgements disagree (see the findings).")
    original_kind: Literal["proposal_time", "state_based", "unknown"] | None = None
    disagreements: list[Disagreement] | None = None
    decisive: Decisive | None = None
    detail: str | None = Field(None, description="The finding in one sentence, for flagged runs.")
    calls: int | None = Field(None, ge=0)
    classes: dict[str, int] | None = Field(None, description="Calls per pair class.")
    critical: dict[str, str] | None = Field(None, description="The class of each call a critical rule judged, by key.")
    findings: list[tuple[str, int]] | None = Field(None, description="Detector findings, kind and count.")
    harness_errors: int | None = Field(None, ge=0)
    unknown_tools: dict[str, int] | None = Field(None, description="Calls to tools no domain or binding knows.")
    report: str | None = Field(None, description="The run's HTML page, relative to the batch's directory.")
    checks: dict[str, Check] | None = Field(None, description="The benchmark's own checks, where a bridge replayed them.")
    drift: Drift | None = None
    world: str | None = Field(None, description="Which world (a bridge's benchmark version) the checks were replayed in.")


class CheckAgreement(_Closed):
    agree: int = Field(..., ge=0)
    runs: int = Field(..., ge=0)
    rate: float = Field(..., ge=0, le=1)


class CheckDisagreement(_Closed):
    run: str
    check: str
    recorded: Any = None
    replayed: Any = None
    first_departure: Any = None
    explanation: str | None = None


class ChecksSummary(_Closed):
    """Agreement with the benchmark's own checks, where a bridge ran them."""

    agreement: dict[str, CheckAgreement]
    disagreements: list[CheckDisagreement]
    drift: dict[str, int]


class BatchSummary(_Closed):
    """``summary.json``: the re-validation table, the runs by finding, and the run ids that matter."""

    summary: Literal["litmus-replay.revalidate"]
    version: Literal[SUMMARY_VERSION]  # type: ignore[valid-type]
    runs: int = Field(..., ge=0)
    table: dict[str, dict[str, int]] = Field(..., description="Original verdict -> pair class (or status) -> runs.")
    findings: dict[str, dict[str, int]] = Field(..., description="Original verdict -> finding (or status) -> runs.")
    over_penalised: list[str]
    under_penalised: list[str]
    check_missed_harm: list[str]
    check_without_harm: list[str]
    drift: list[str]
    check_changed: list[str]
    disagrees: list[str]
    missing_world: list[str]
    harness_error: list[str]
    input_error: list[str]
    no_tool_calls: list[str]
    incomplete: list[str]
    unknown_tools: dict[str, int] = Field(..., description="Tools no domain or binding knows, most called first.")
    checks: ChecksSummary | None = None


def read_line(raw: str | bytes) -> ResultLine:
    """A line of ``results.jsonl`` as its model (raises pydantic's ValidationError, a ValueError, on one
    that does not fit). Parsed by the standard library, which takes back the escapes of a lone surrogate
    a run recorded (pydantic's parser refuses them)."""
    return ResultLine.model_validate(json.loads(raw))


def as_line(line: ResultLine | Mapping[str, Any]) -> ResultLine:
    """A result line as its model, whether built by a worker (a dict) or read back."""
    return line if isinstance(line, ResultLine) else ResultLine.model_validate(line)


def line_json(line: ResultLine) -> str:
    """A result line as it is written: its fields as set (a line says only what its status knows), keys
    sorted, one line."""
    return json.dumps(line.model_dump(mode="json", exclude_unset=True), sort_keys=True)


# name on the command line -> (model, schema file, $id)
SCHEMAS: dict[str, tuple[type[BaseModel], str, str]] = {
    "results-line": (ResultLine, f"results-line-v{RESULT_LINE_VERSION}.schema.json",
                     f"urn:litmus-replay:results-line:v{RESULT_LINE_VERSION}"),
    "summary": (BatchSummary, f"summary-v{SUMMARY_VERSION}.schema.json", f"urn:litmus-replay:summary:v{SUMMARY_VERSION}"),
}


def schema(name: str) -> dict[str, Any]:
    """The JSON Schema of ``results-line`` or ``summary``, as committed."""
    model, _, identifier = SCHEMAS[name]
    return model_schema(model, identifier)


def schema_text(name: str) -> str:
    return json.dumps(schema(name), indent=2, sort_keys=True) + "\n"


def committed_schema(name: str) -> dict[str, Any]:
    """The schema file shipped with the package."""
    return shipped_schema(SCHEMAS[name][1])
