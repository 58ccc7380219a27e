"""The shape of the JSON run report, as pydantic models, and the JSON Schema generated from them.

The models exist to state the shape once: the schema committed at
``replay/schemas/report-v1.schema.json`` is generated from them, and a test checks that it still is.
Regenerate after a change (from a source checkout) with::

    python -c 'from litmus_replay.replay.report.schema import main; main()'

Open-ended values (arguments, outputs, resolved parameters, a finding's evidence) are any JSON; graph
nodes and edge evidence accept fields beyond the ones named, because the graph gains evidence as
detectors need it. Everything else is closed, so an accidental change of shape fails the schema test.
"""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from ..scoring import PairClass, Unscoreable

__all__ = ["REPORT_SCHEMA_FILE", "RunDocument", "committed_report_schema", "report_schema", "report_schema_text"]

REPORT_VERSION = 1
REPORT_SCHEMA_FILE = f"report-v{REPORT_VERSION}.schema.json"


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


# --- one call ----------------------------------------------------------------------------------------


class RecordedDoc(_Closed):
    """The result the benchmark recorded for the call."""

    status: Literal["ok", "error"]
    error: str | None
    output: Any


class EffectCounts(_Closed):
    created: int
    changed: int
    deleted: int
    total: int


class EffectValueDoc(_Closed):
    """An affected resource's bounded value before and after the call (null where it did not exist), and
    how its numbers moved."""

    before: Any
    after: Any
    delta: Any = None


class EffectsDoc(_Closed):
    """The state diff of a call: resource ids created, changed and deleted, and the values of what they
    touched (absent in reports written before effects carried values)."""

    created: list[str]
    changed: list[str]
    deleted: list[str]
    counts: EffectCounts
    values: dict[str, EffectValueDoc] = Field(default_factory=dict)
    unobserved: str | None = Field(None, description="Why the world saw only part of its state around the call "
                                                     "(a bounded walk): more may have happened than is listed.")


class ResolutionDoc(_Closed):
    """Who acted and on what, as the world resolved it."""

    principal: str
    resolved_params: dict[str, Any]
    evidence: list[str]
    reads: list[str]


class OutcomeDoc(_Closed):
    """What the call did in one world."""

    status: Literal["ok", "error", "pending"]
    committed: bool
    output: Any
    error_code: str | None
    error: str | None
    effects: EffectsDoc
    resolution: ResolutionDoc | None


class ContextDoc(_Closed):
    """The adjudication context of one moment."""

    moment: Literal["proposal", "commit"]
    principal: str
    resolved_params: dict[str, Any]
    policy_verdict: str
    committed: bool
    status: str
    error_code: str | None
    matched_rules: list[str]
    evidence: list[str]
    policy_errors: list[str]


class JudgementDoc(_Closed):
    """The policy's verdict in one context and the rules behind it."""

    verdict: str
    matched: list[str]
    critical: list[str]
    unapplied: list[str]
    errors: list[str]


class PairDoc(_Closed):
    """The call's class; ``reason`` only when unscoreable."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    cls: PairClass = Field(..., alias="class")
    reason: Unscoreable | None
    explanation: str


class CallDoc(_Closed):
    """One recorded call replayed into both worlds and scored as a pair."""

    key: str = Field(..., description="Positional key t<turn>.c<position>.")
    turn: int
    id: str | None
    tool: str
    arguments: dict[str, Any]
    recorded: RecordedDoc | None
    recorded_match: bool | None
    stub: OutcomeDoc
    real: OutcomeDoc | None
    proposal: ContextDoc
    commit: ContextDoc | None
    proposal_judgement: JudgementDoc
    commit_judgement: JudgementDoc | None
    pair: PairDoc
    harness_error: str | None
    bound_to: str | None = Field(None, description="The domain tool a binding mapped the recorded tool onto.")


# --- the causal graph ----------------------------------------------------------------------------------


class WorldNodeDoc(_Open):
    """The initial state of the world."""

    id: str
    kind: Literal["initial"]
    turn: int
    label: str


class CallNodeDoc(_Open):
    """A call in the graph, with what a picture of it needs."""

    id: str
    kind: Literal["call"]
    turn: int
    position: int
    tool: str
    arguments: dict[str, Any]
    pair_class: PairClass
    reason: Unscoreable | None
    stub_status: str
    real_status: str
    real_error_code: str | None
    proposal_verdict: str
    commit_verdict: str | None
    critical: bool
    divergent: bool
    counterfactual: bool


class DataEvidence(_Open):
    token: str
    argument: str
    span: list[int] = Field(..., min_length=2, max_length=2)
    transform: str
    source_field: Literal["arguments", "output"]
    source_path: str


class StateEvidence(_Open):
    resource: str
    world: Literal["real", "stub"]
    explanation: str


class DivergenceEvidence(_Open):
    token: str
    argument: str
    explanation: str


class DataEdgeDoc(_Closed):
    """An argument carried a piece of an earlier call's output or argument."""

    source: str
    target: str
    kind: Literal["data"]
    evidence: DataEvidence


class StateEdgeDoc(_Closed):
    """A call depended on a resource an earlier call (or the initial state) wrote."""

    source: str
    target: str
    kind: Literal["state"]
    evidence: StateEvidence


class DivergenceEdgeDoc(_Closed):
    """The real output no longer carries what the recorded argument took from it."""

    source: str
    target: str
    kind: Literal["divergence"]
    evidence: DivergenceEvidence


NodeDoc = Annotated[Union[WorldNodeDoc, CallNodeDoc], Field(discriminator="kind")]
EdgeDoc = Annotated[Union[DataEdgeDoc, StateEdgeDoc, DivergenceEdgeDoc], Field(discriminator="kind")]


class GraphDoc(_Closed):
    """The causal graph: the ``world`` node and one node per call; edges with their evidence."""

    nodes: list[NodeDoc]
    edges: list[EdgeDoc]


class FindingDoc(_Closed):
    """What a detector saw, where, in one sentence."""

    kind: str
    severity: Literal["info", "warning", "high"]
    nodes: list[str]
    sentence: str
    evidence: dict[str, Any]


# --- one trajectory, the whole run -----------------------------------------------------------------------


class OriginalVerdictDoc(_Closed):
    label: str
    flagged_call: str | None
    kind: Literal["proposal_time", "state_based", "unknown"] = Field(
        "unknown", description="What the label judged: the proposed calls, the state after the run, or unknown.")


class DisagreementDoc(_Closed):
    """Two judgements of a run that disagree, and the finding kind that names it."""

    kind: str
    between: list[Literal["recorded", "check", "effects"]]
    sentence: str
    call: str | None


class RunVerdictDoc(_Closed):
    """The run's three judgements side by side (see litmus_replay.replay.verdicts) and its finding."""

    finding: str
    recorded: dict[str, Any] = Field(..., description="The recorded verdict: label, kind, and what it says.")
    check: dict[str, Any] | None = Field(..., description="The benchmark's own harm check, replayed, if any.")
    effects: dict[str, Any] = Field(..., description="What the real world committed, as the policy judges it.")
    disagreements: list[DisagreementDoc]
    decisive: dict[str, Any] | None = Field(..., description="The decisive call, its rule and the rule's condition.")
    sentence: str


class RevalidationDoc(_Closed):
    """The benchmark's verdict beside the re-validated class."""

    original: str | None
    revalidated: PairClass
    finding: str
    critical: dict[str, PairClass]


class TrajectoryDoc(_Closed):
    """One trajectory: its re-validation, findings, causal graph and every call's pair."""

    trajectory: str
    task: str | None
    scenario: str | None
    principal: str
    original_verdict: OriginalVerdictDoc | None
    revalidation: RevalidationDoc
    verdict: RunVerdictDoc | None
    findings: list[FindingDoc]
    graph: GraphDoc
    calls: list[CallDoc]


class ClassCounts(_Closed):
    confirmed_misuse: int
    confirmed_safe: int
    proposal_only_misuse: int
    commit_only_misuse: int
    unscoreable: int


class SummaryDoc(_Closed):
    trajectories: int
    calls: int
    classes: ClassCounts
    expectations_failed: dict[str, list[str]] = Field(..., description="Scenario/trajectory label -> problems.")
    input_errors: int


class RunDocument(_Closed):
    """A run of litmus-replay: a summary, every trajectory, and the input errors (one line each)."""

    report: Literal["litmus-replay.run"]
    version: Literal[1]
    summary: SummaryDoc
    results: list[TrajectoryDoc]
    errors: list[str]


def model_schema(model: type[BaseModel], identifier: str) -> dict[str, Any]:
    """A model's JSON Schema as the package ships it (draft 2020-12, its ``$id``, keys sorted)."""
    schema = model.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = identifier
    return json.loads(json.dumps(schema, sort_keys=True))


def shipped_schema(file: str) -> dict[str, Any]:
    """A schema file shipped with the package (``replay/schemas/``)."""
    return json.loads(resources.files("litmus_replay.replay").joinpath("schemas", file).read_text("utf-8"))


def report_schema() -> dict[str, Any]:
    """The JSON Schema of the run report, as committed."""
    return model_schema(RunDocument, f"urn:litmus-replay:report:v{REPORT_VERSION}")


def committed_report_schema() -> dict[str, Any]:
    """The schema file shipped with the package."""
    return shipped_schema(REPORT_SCHEMA_FILE)


def report_schema_text() -> str:
    """The schema file's exact text."""
    return json.dumps(report_schema(), indent=2, sort_keys=True) + "\n"


def main() -> None:
    """Rewrite the committed schema beside the sources (the regeneration command in the module docstring)."""
    path = Path(__file__).resolve().parent.parent / "schemas" / REPORT_SCHEMA_FILE
    path.write_text(report_schema_text(), encoding="utf-8")
    sys.stdout.write(f"wrote {path}\n")
