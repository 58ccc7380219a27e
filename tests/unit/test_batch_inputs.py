"""Every input is in every output: files no adapter can read are lines of results.jsonl and rows of the
index; runs that share an id get readable distinct ones."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

from litmus_replay.replay import batch

EXTERNAL = Path(__file__).resolve().parents[1] / "fixtures" / "external"
AGENTDOJO = EXTERNAL / "agentdojo" / "injection_task_3.json"  # pipeline_name "local"


def _worlds(root: Path) -> Path:
    worlds = root / "worlds"
    worlds.mkdir()
    (worlds / "benign.yaml").write_text("name: benign\nworld: {principals: [alice]}\n")
    return worlds


def test_a_directory_of_unreadable_truncated_empty_and_valid_files_lists_every_file(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "binary.json").write_bytes(bytes(range(256)) * 4)
    (runs / "cut.eval").write_bytes((EXTERNAL / "inspect" / "zstd_epochs.eval").read_bytes()[:1200])
    (runs / "empty.jsonl").write_text("")
    (runs / "half.json").write_text('{"messages": [{"role": "assistant", "tool_calls": [')
    shutil.copy(EXTERNAL / "inspect" / "zstd_epochs.eval", runs / "whole.eval")
    out = tmp_path / "out"
    summary = batch.run_batch([runs], _worlds(tmp_path), out, runtime="inprocess", reports=False)

    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    files = [line["file"] for line in lines]
    bad = ["binary.json", "cut.eval", "empty.jsonl", "half.json"]
    assert sorted(set(files)) == sorted(str(runs / name) for name in [*bad, "whole.eval"])
    errors = {Path(line["file"]).name: line["error"] for line in lines if line["status"] == "input_error"}
    assert sorted(errors) == bad
    assert "truncated" in errors["cut.eval"] and "empty file" in errors["empty.jsonl"]
    assert all(name in errors[name] for name in bad), "each reason names its file"
    assert sorted(summary["input_error"]) == sorted(str(runs / name) for name in bad)
    assert summary["table"]["none"]["input_error"] == len(bad)
    assert sum(1 for line in lines if Path(line["file"]).name == "whole.eval") == 5  # its samples, no world

    index = html.unescape((out / "index.html").read_text())
    for line in lines:
        assert line["run"] in index and (line.get("error") or "") in index


def test_an_unreadable_file_stays_listed_when_the_batch_resumes(tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "empty.jsonl").write_text("")
    worlds, out = _worlds(tmp_path), tmp_path / "out"
    batch.run_batch([runs], worlds, out, runtime="inprocess", reports=False)
    first = (out / "results.jsonl").read_bytes()
    batch.run_batch([runs], worlds, out, runtime="inprocess", reports=False)
    assert (out / "results.jsonl").read_bytes() == first and first.count(b"\n") == 1


def test_two_pipelines_both_named_local_get_readable_distinct_ids(tmp_path):
    runs = tmp_path / "runs"
    for model in ("model-a", "model-b"):
        target = runs / model / "local" / "slack" / "user_task_12" / "direct"
        target.mkdir(parents=True)
        shutil.copy(AGENTDOJO, target / "injection_task_3.json")
    found = batch.discover([runs])
    ids = [run.run_id for run in found.runs]
    assert len(set(ids)) == 2
    assert ids == [f"local/slack/user_task_12/direct/injection_task_3@{model}/local/slack/user_task_12/direct/injection_task_3.json"
                   for model in ("model-a", "model-b")]
    assert all(str(tmp_path) not in run_id for run_id in ids), "ids say where under the input, not the whole path"


ANTHROPIC_RUN = {  # a Messages request body: the format names no task
    "model": "claude-x",
    "messages": [
        {"role": "user", "content": "What do my notes say?"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "read_file",
                                           "input": {"path": "/workspace/notes.txt"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "hello"}]},
        {"role": "assistant", "content": "They say hello."},
    ],
}


NOTES_WORLD = "name: acme/notes\nworld: {principals: [alice], files: {tree: {/workspace/notes.txt: hello}}}\n"


def _notes(root: Path) -> tuple[Path, Path]:
    """A worlds directory serving ``acme/notes``, and the Anthropic run beside it."""
    worlds = root / "worlds"
    worlds.mkdir(exist_ok=True)
    (worlds / "notes.yaml").write_text(NOTES_WORLD)
    run = root / "messages.json"
    run.write_text(json.dumps(ANTHROPIC_RUN))
    return worlds, run


def test_runs_whose_format_names_no_task_find_their_world_by_the_task_given(tmp_path):
    from litmus_replay.replay.cli import main
    from click.testing import CliRunner

    worlds, run = _notes(tmp_path)
    runner = CliRunner()
    common = [str(run), "--worlds", str(worlds), "--runtime", "inprocess", "--jobs", "1", "--reports", "all"]
    without = runner.invoke(main, ["revalidate", *common, "--out", str(tmp_path / "without")])
    assert without.exit_code == 3
    (line,) = [json.loads(text) for text in (tmp_path / "without" / "results.jsonl").read_text().splitlines()]
    assert line["status"] == "missing_world" and "names no task" in line["error"] and "--task" in line["error"]

    out = tmp_path / "with"
    given = runner.invoke(main, ["revalidate", *common, "--task", "acme/notes", "--out", str(out)])
    assert given.exit_code == 0, given.output
    (line,) = [json.loads(text) for text in (out / "results.jsonl").read_text().splitlines()]
    assert (line["status"], line["task"], line["calls"]) == ("ok", "acme/notes", 1)
    page = out / line["report"]
    written = page.read_bytes()
    page.unlink()
    assert batch.write_run_page(out, line["run"], runtime="inprocess") == page  # the task is in its line
    assert page.read_bytes() == written

    empty = runner.invoke(main, ["revalidate", *common, "--task", " ", "--out", str(tmp_path / "empty")])
    assert empty.exit_code == 2 and "--task" in empty.output and not (tmp_path / "empty").exists()


def test_a_run_the_benchmark_recorded_as_cut_short_says_so_in_its_line_summary_and_page(tmp_path):
    call = {"id": "c1", "function": "read_file", "arguments": {"path": "/workspace/notes.txt"}}
    replied = [{"role": "user", "content": "read my notes"}, {"role": "assistant", "content": "", "tool_calls": [call]},
               {"role": "tool", "content": "hello", "tool_call_id": "c1", "function": "read_file"}]
    log = {"version": 2, "status": "error", "eval": {"task": "acme/notes", "run_id": "r1"}, "samples": [
        {"id": "a", "epoch": 1, "messages": replied, "error": {"message": "RuntimeError('model\nexploded')"}},
        {"id": "b", "epoch": 1, "messages": replied[:1], "limit": {"type": "message", "limit": 10}},
        {"id": "d", "epoch": 1, "messages": replied[:1], "limit": {"type": "token", "limit": 1000000.0}},
        {"id": "c", "epoch": 1, "messages": replied}]}
    (tmp_path / "log.json").write_text(json.dumps(log))
    worlds = tmp_path / "worlds"
    worlds.mkdir()
    (worlds / "notes.yaml").write_text(
        "name: acme/notes\nworld: {principals: [agent], files: {tree: {/workspace/notes.txt: hello}}}\n")
    out = tmp_path / "out"
    summary = batch.run_batch([tmp_path / "log.json"], worlds, out, runtime="inprocess", reports="all")
    lines = {line["run"]: line for line in map(json.loads, (out / "results.jsonl").read_text().splitlines())}
    assert lines["a_epoch_1"]["incomplete"] == "error: RuntimeError('model exploded')"
    assert lines["a_epoch_1"]["status"] == "ok"
    assert (lines["b_epoch_1"]["status"], lines["b_epoch_1"]["incomplete"]) == ("no_tool_calls", "message limit reached (10)")
    assert "incomplete" not in lines["c_epoch_1"]
    assert lines["d_epoch_1"]["incomplete"] == "token limit reached (1000000)"
    assert summary["incomplete"] == ["a_epoch_1", "b_epoch_1", "d_epoch_1"]
    page = (out / lines["a_epoch_1"]["report"]).read_text()
    assert "cut short" in page and html.escape("RuntimeError('model exploded')") in page


def test_a_page_made_later_replays_a_run_under_the_task_its_line_records_even_after_a_resume(tmp_path):
    worlds, run = _notes(tmp_path)
    out = tmp_path / "out"
    batch.run_batch([run], worlds, out, runtime="inprocess", reports="all", task=" acme/notes ")
    batch.run_batch([run], worlds, out, runtime="inprocess", reports="all")  # resumed without --task: done already
    (line,) = [json.loads(text) for text in (out / "results.jsonl").read_text().splitlines()]
    assert line["task"] == "acme/notes" and line["status"] == "ok"
    page = out / line["report"]
    written = page.read_bytes()
    page.unlink()
    batch.write_run_page(out, line["run"], runtime="inprocess")
    assert page.read_bytes() == written


def test_one_run_in_three_inputs_of_the_same_file_name_keeps_three_lines_each_its_own(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # relative inputs, as typed: in1, in2 and m.json directly
    worlds, _ = _notes(tmp_path)
    for where in ("in1", "in2", "."):
        Path(where).mkdir(exist_ok=True)
        text = json.dumps(ANTHROPIC_RUN).replace("/workspace/notes.txt", f"/workspace/from-{where.strip('.') or 'top'}.txt")
        (Path(where) / "m.json").write_text(text)
    inputs = [Path("in1"), Path("in2"), Path("m.json")]
    batch.run_batch(inputs, worlds, Path("out"), runtime="inprocess", reports="all", task="acme/notes")
    lines = [json.loads(text) for text in Path("out/results.jsonl").read_text().splitlines()]
    assert sorted(line["file"] for line in lines) == ["in1/m.json", "in2/m.json", "m.json"]
    assert len({line["run"] for line in lines}) == 3 and len({line["report"] for line in lines}) == 3
    for line in lines:  # each page is its own run's: it shows the path its run read
        assert f"from-{Path(line['file']).parent.name or 'top'}.txt" in Path("out", line["report"]).read_text()
