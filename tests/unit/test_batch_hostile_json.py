"""One bad run file never stops a batch, whatever adapter reads it and whatever its JSON holds.

Each example takes a real sample of one format and plants one hostile value in it (a lone surrogate, NaN or
Infinity, a number no float or int conversion takes, a duplicated key, nesting deeper than a parser
follows), at any place in the document or inside a JSON string it carries (a tool call's arguments). The
file joins two innocent runs in a ``revalidate`` batch, through the CLI as a user runs it: the innocent
runs' lines are what they are alone, the hostile file is either replayed or one ``input_error`` line per
file naming it, the exit status says which, and nothing is a traceback.
"""

from __future__ import annotations

import io
import json
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from litmus_replay.adapters._zip import read_member
from litmus_replay.replay.cli import main
from test_adapters_fuzz import FORMATS, mutate, native_path, paths_in, real_samples  # noqa: F401 (a fixture); tests/unit is on sys.path

pytestmark = pytest.mark.slow  # a property per adapter: seconds each

ROOT = Path(__file__).resolve().parents[2]
WORLDS = ROOT / "corpus" / "worlds"
EXAMPLES = settings(max_examples=int(__import__("os").environ.get("LITMUS_FUZZ_EXAMPLES", "40")) // 2 or 1,
                    deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

# JSON text no encoder writes from a Python value: planted as a placeholder string, then put in its place.
RAW = {
    "nan": "NaN",
    "infinity": "-Infinity",
    "huge-int": "9" * 5000,  # past Python's 4,300-digit conversion limit
    "huge-float": "1e999",
    "deep": "[" * 3000 + "]" * 3000,  # past the parser's recursion limit
}
LONE_SURROGATES = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), min_size=1, max_size=2)
HOSTILE_TEXT = st.builds(lambda before, odd, after: before + odd + after, st.text(max_size=4), LONE_SURROGATES,
                         st.text(max_size=4))
STATUSES = {"ok", "input_error", "missing_world", "harness_error", "no_tool_calls"}


def _placeholder(kind: str) -> str:
    return f"\x00raw:{kind}\x00"


def _dumps(value: Any) -> str:
    """JSON text of ``value`` with each placeholder replaced by its raw token, and each duplicate-key
    marker by a second copy of its object's first key."""
    text = json.dumps(value)
    for kind, token in RAW.items():
        text = text.replace(json.dumps(_placeholder(kind)), token)
    return text.replace(json.dumps("\x00dup\x00") + ": ", '"id": {"dup": 1}, "id": ')


def _plant(data, value: Any) -> Any:
    """``value`` with one hostile value at a drawn place: replacing what is there, as a duplicated key
    of an object, or inside a string that holds a JSON document of its own."""
    where = data.draw(st.sampled_from(paths_in(value)), label="where")
    here = value
    for step in where:
        here = here[step]
    if isinstance(here, str) and here.strip()[:1] in ("{", "[") and data.draw(st.booleans(), label="inside the string"):
        try:
            inner = json.loads(here)
        except ValueError:
            inner = None
        if isinstance(inner, (dict, list)):
            return mutate(value, where, _dumps(_plant(data, inner)), delete=False)
    kind = data.draw(st.sampled_from(["surrogate", "dup", *RAW]), label="kind")
    if kind == "dup" and isinstance(here, dict):
        return mutate(value, where, {"\x00dup\x00": None, **here}, delete=False)
    if kind in RAW:
        return mutate(value, where, _placeholder(kind), delete=False)
    return mutate(value, where, data.draw(HOSTILE_TEXT, label="text"), delete=False)


def hostile_bytes(data, path: Path) -> bytes:
    raw = path.read_bytes()
    if path.suffix == ".eval":
        out = io.BytesIO()
        with zipfile.ZipFile(io.BytesIO(raw)) as original, zipfile.ZipFile(out, "w") as rewritten:
            names = original.namelist()
            target = data.draw(st.sampled_from([n for n in names if n.endswith(".json")]), label="member")
            for name in names:
                member = read_member(original, raw, name, 1 << 30)
                if name == target:
                    member = _dumps(_plant(data, json.loads(member))).encode()
                rewritten.writestr(name, member)
        return out.getvalue()
    if path.suffix == ".yaml":  # a recorded HTTP exchange: the hostile value goes in a JSON body
        cassette = yaml.safe_load(raw)
        interaction = data.draw(st.sampled_from(cassette["interactions"]), label="interaction")
        body = interaction["request"]["body"]
        interaction["request"]["body"] = _dumps(_plant(data, json.loads(body)))
        return yaml.safe_dump(cassette).encode()
    if path.suffix == ".jsonl":
        lines = [json.loads(line) for line in raw.decode().splitlines() if line.strip()]
        index = data.draw(st.integers(0, len(lines) - 1), label="line")
        return "\n".join(_dumps(_plant(data, line)) if i == index else json.dumps(line)
                         for i, line in enumerate(lines)).encode()
    return _dumps(_plant(data, json.loads(raw))).encode()


def _innocent(run_id: str, path: str) -> dict:
    arguments = json.dumps({"path": path})
    return {"id": run_id, "metadata": {"task": "files-workspace"}, "messages": [
        {"role": "user", "content": "What does the readme say?"},
        {"role": "assistant", "tool_calls": [{"id": "c1", "type": "function",
                                              "function": {"name": "read_file", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "hello"}]}


def _revalidate(runs: Path, out: Path) -> tuple[int, list[dict], Any]:
    result = CliRunner().invoke(main, ["revalidate", str(runs), "--worlds", str(WORLDS), "--out", str(out),
                                       "--runtime", "inprocess", "--jobs", "1", "--reports", "all"])
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text(encoding="utf-8").splitlines()]
    return result.exit_code, lines, result


def _innocent_lines(lines: list[dict]) -> list[dict]:
    """The innocent runs' lines, each file named as it is under the batch's input."""
    return sorted(({**line, "file": Path(line["file"]).name} for line in lines
                   if Path(line["file"]).name.startswith("innocent")), key=lambda line: line["run"])


@pytest.fixture(scope="module")
def innocents(tmp_path_factory) -> tuple[Path, list[dict]]:
    """Two runs and the lines a batch of them alone writes."""
    root = tmp_path_factory.mktemp("innocents")
    runs = root / "runs"
    runs.mkdir()
    (runs / "innocent-a.jsonl").write_text(json.dumps(_innocent("a", "/workspace/README.md")) + "\n")
    (runs / "innocent-b.jsonl").write_text(json.dumps(_innocent("b", "/workspace/docs/guide.md")) + "\n")
    status, lines, result = _revalidate(runs, root / "out")
    assert status == 0, result.output
    assert [line["status"] for line in lines] == ["ok", "ok"]
    return runs, _innocent_lines(lines)


@pytest.mark.parametrize("name", FORMATS)
@EXAMPLES
@given(data=st.data())
def test_a_hostile_file_beside_innocent_runs_costs_only_itself(name, data, innocents, tmp_path, native_path):  # noqa: F811
    runs, alone = innocents
    samples = real_samples(name, native_path)
    if name == "openai-chat" and data.draw(st.booleans(), label="an innocent run, made hostile"):
        samples = sorted(runs.iterdir())  # a run with a world: the hostile value reaches the replay and the page
    source = data.draw(st.sampled_from(samples), label="sample")
    batch_dir = Path(tempfile.mkdtemp(dir=tmp_path))
    shutil.copytree(runs, batch_dir / "runs")
    hostile = batch_dir / "runs" / f"hostile{source.suffix}"
    hostile.write_bytes(hostile_bytes(data, source))

    status, lines, result = _revalidate(batch_dir / "runs", batch_dir / "out")

    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    assert _innocent_lines(lines) == alone
    mine = [line for line in lines if line["file"] == str(hostile)]
    assert mine, "the hostile file is in the results"
    assert {line["status"] for line in mine} <= STATUSES
    event(f"hostile file: {' '.join(sorted({line['status'] for line in mine}))}")
    errors = [line for line in mine if line["status"] == "input_error"]
    for line in errors:
        assert str(hostile) in line["error"] and "\n" not in line["error"], line
    not_revalidated = any(line["status"] in ("missing_world", "harness_error") for line in mine)
    assert status == (2 if errors else 3 if not_revalidated else 0), (status, mine, result.output)
