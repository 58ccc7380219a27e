"""The JSON run report against its committed schema: the schema is what the models generate, and real
documents — the whole pack replayed, through the runner and through ``run --json`` — validate."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from litmus_replay.envs.runtime import get_runtime
from litmus_replay.replay.cli import main
from litmus_replay.replay.report import REPORT_VERSION, committed_report_schema, report_schema, run_document
from litmus_replay.replay.report.schema import report_schema_text
from litmus_replay.replay.runner import Batch, iter_scenario_runs

ROOT = Path(__file__).resolve().parents[2]
COMMITTED = ROOT / "replay" / "schemas" / f"report-v{REPORT_VERSION}.schema.json"
PACKS = [ROOT / "scenarios" / "core", ROOT / "scenarios" / "detectors", ROOT / "scenarios" / "bindings"]


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = committed_report_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def document() -> dict:
    batch = Batch()
    with get_runtime("inprocess") as runtime:
        runs = list(iter_scenario_runs(PACKS, runtime, batch))
    assert runs and batch.errors == []
    return json.loads(json.dumps(run_document(runs, batch.errors), default=str))


def test_committed_schema_is_what_the_models_generate():
    assert COMMITTED.read_text(encoding="utf-8") == report_schema_text(), (
        "regenerate with: python -c 'from litmus_replay.replay.report.schema import main; main()'"
    )
    assert committed_report_schema() == report_schema()


def test_pack_document_validates(validator, document):
    errors = sorted(validator.iter_errors(document), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:10])
    assert document["version"] == REPORT_VERSION
    kinds = {edge["kind"] for result in document["results"] for edge in result["graph"]["edges"]}
    assert kinds >= {"data", "state"}
    assert any(result["findings"] for result in document["results"])


def test_run_json_validates(validator, tmp_path):
    path = tmp_path / "report.json"
    result = CliRunner().invoke(main, ["run", "-q", *map(str, PACKS), "--json", str(path)])
    assert result.exit_code == 0, result.stderr
    document = json.loads(path.read_text())
    validator.validate(document)
    assert len(document["results"]) == document["summary"]["trajectories"] > 10


@pytest.mark.parametrize(
    "breakage",
    ["drop_graph", "drop_findings", "unknown_class", "edge_without_evidence", "extra_field", "wrong_version"],
)
def test_schema_rejects_a_changed_shape(validator, document, breakage):
    broken = copy.deepcopy(document)
    first = broken["results"][0]
    if breakage == "drop_graph":
        del first["graph"]
    elif breakage == "drop_findings":
        del first["findings"]
    elif breakage == "unknown_class":
        first["calls"][0]["pair"]["class"] = "probably_fine"
    elif breakage == "edge_without_evidence":
        edge = next(e for r in broken["results"] for e in r["graph"]["edges"])
        del edge["evidence"]
    elif breakage == "extra_field":
        first["calls"][0]["surprise"] = 1
    else:
        broken["version"] = 2
    assert not validator.is_valid(broken)
