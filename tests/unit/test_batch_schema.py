"""A batch's outputs have schemas: one line of results.jsonl and summary.json are pydantic models whose
JSON Schemas ship with the package (``litmus-replay schema results-line``, ``schema summary``); every line
a batch writes fits them, and a line that does not is replayed again on resume, never read as a result."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner

from litmus_replay.replay import batch
from litmus_replay.replay.batch.schema import SCHEMAS, committed_schema, schema, schema_text
from litmus_replay.replay.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXTERNAL = ROOT / "tests" / "fixtures" / "external"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_shipped_schema_is_what_the_model_gives(name):
    assert committed_schema(name) == schema(name), f"regenerate with: litmus-replay schema {name} -o replay/schemas/{SCHEMAS[name][1]}"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_the_schema_command_prints_it(name):
    result = CliRunner().invoke(main, ["schema", name])
    assert result.exit_code == 0 and result.output == schema_text(name)


def _validators() -> tuple[jsonschema.Draft202012Validator, jsonschema.Draft202012Validator]:
    return (jsonschema.Draft202012Validator(committed_schema("results-line")),
            jsonschema.Draft202012Validator(committed_schema("summary")))


def assert_fits(out: Path) -> list[dict]:
    line_schema, summary_schema = _validators()
    lines = [json.loads(raw) for raw in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    for line in lines:
        errors = [f"{'/'.join(map(str, error.path))}: {error.message}" for error in line_schema.iter_errors(line)]
        assert errors == [], (line["run"], errors)
    summary_schema.validate(json.loads((out / "summary.json").read_text(encoding="utf-8")))
    return lines


def _mixed_batch(root: Path) -> tuple[Path, Path]:
    runs, worlds = root / "runs", root / "worlds"
    runs.mkdir(parents=True)
    worlds.mkdir()
    (worlds / "files.yaml").write_text("name: files\nworld: {principals: [alice], files: {tree: {/workspace/a.txt: hi}}}\n")
    def chat(path: str, task: str = "files") -> str:
        arguments = json.dumps({"path": path})
        return json.dumps({"metadata": {"task": task}, "messages": [
            {"role": "user", "content": "read it"},
            {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                  "function": {"name": "read_file", "arguments": arguments}}]},
            {"role": "tool", "tool_call_id": "c", "content": "hi"}]}) + "\n"
    (runs / "ok.jsonl").write_text(chat("/workspace/a.txt"))
    (runs / "surrogate.jsonl").write_text(chat("/workspace/\ud800"))
    (runs / "nowhere.jsonl").write_text(chat("/workspace/a.txt", task="elsewhere"))
    (runs / "talk.jsonl").write_text(json.dumps({"format_version": 1, "id": "talk", "task": "files", "principal": "alice",
                                                 "turns": [{"text": "hello", "calls": []}]}) + "\n")
    (runs / "broken.json").write_text('{"messages": [')
    shutil.copy(EXTERNAL / "agentdojo" / "injection_task_3.json", runs / "agentdojo-run.json")  # a bridge's checks
    return runs, worlds


def test_every_line_of_every_status_fits_its_schema_and_the_summary_too(tmp_path):
    runs, worlds = _mixed_batch(tmp_path)
    out = tmp_path / "out"
    batch.run_batch([runs], worlds, out, runtime="inprocess", reports="all")
    lines = assert_fits(out)
    statuses = {line["status"] for line in lines}
    assert statuses == {"ok", "missing_world", "no_tool_calls", "input_error"}, statuses
    assert any("checks" in line for line in lines), "a bridge's checks are in a line"


def test_a_line_that_does_not_fit_is_replayed_again_on_resume(tmp_path):
    runs, worlds = _mixed_batch(tmp_path)
    out = tmp_path / "out"
    batch.run_batch([runs], worlds, out, runtime="inprocess", reports="none")
    path = out / "results.jsonl"
    first = path.read_text(encoding="utf-8").splitlines()
    edited = [json.dumps({**json.loads(line), "calls": "many"}, sort_keys=True)
              if json.loads(line)["run"].startswith("ok") else line for line in first]
    path.write_text("\n".join(edited) + "\n", encoding="utf-8")
    assert [line.run for line in batch.iter_results(path)] == [json.loads(line)["run"] for line in first
                                                                     if not json.loads(line)["run"].startswith("ok")]
    batch.run_batch([runs], worlds, out, runtime="inprocess", reports="none")
    assert path.read_text(encoding="utf-8").splitlines() == first


@pytest.mark.slow
def test_every_line_the_shipped_corpus_writes_fits_its_schema(tmp_path):
    out = tmp_path / "out"
    batch.run_batch([ROOT / "corpus" / "runs"], ROOT / "corpus" / "worlds", out, runtime="inprocess", reports="none")
    assert len(assert_fits(out)) == 1200
