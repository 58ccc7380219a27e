"""An archive's members are bounded together, not only one by one: many highly compressible samples, each
under ``member_bytes``, are refused once they add up past ``archive_bytes``, in one line naming the file,
the member at which the total passed, and the limit; memory stays near that limit; a batch goes on."""

from __future__ import annotations

import json
import tracemalloc
import zipfile
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from litmus_replay.adapters.inspect_log import InspectAdapter, _check_declared_sizes
from litmus_replay.replay import batch, limits
from litmus_replay.replay.cli import main
from litmus_replay.replay.errors import InputError

from test_batch import PACK_RUNS, _make_batch  # tests/unit is on sys.path (rootdir-relative imports)

NO_LIMITS = {f"LITMUS_LIMIT_{name.upper()}": None for name in limits.DEFAULTS}
HEADER = {"version": 2, "status": "success", "eval": {"task": "t", "run_id": "r", "created": "2025-01-01T00:00:00+00:00"}}
MEMBER_LIMIT = 256 << 10
TOTAL_LIMIT = 2 << 20
MEMBER = 192 << 10  # each sample: three quarters of the member limit, a few hundred bytes compressed


def _sample(index: int, size: int) -> bytes:
    head = json.dumps({"id": index, "epoch": 1, "messages": [
        {"role": "assistant", "content": "", "tool_calls": [{"id": f"c{index}", "function": "read_file",
                                                             "arguments": {"path": "/workspace/README.md"}}]}]})
    pad = size - len(head) - len(', "pad": ""')
    return (head[:-1] + ', "pad": "' + " " * pad + '"}').encode()


def _archive(path: Path, members: int, size: int = MEMBER) -> Path:
    """An .eval archive of ``members`` samples of ``size`` bytes each, almost all of it spaces."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("header.json", json.dumps(HEADER))
        for index in range(1, members + 1):
            archive.writestr(f"samples/{index}_epoch_1.json", _sample(index, size))
    return path


def _crossing(path: Path) -> tuple[str, int]:
    """The member (in the order the reader reads: header, then samples) at which the total passes the
    limit, and the total there."""
    with zipfile.ZipFile(path) as archive:
        infos = {info.filename: info.file_size for info in archive.infolist()}
    total = 0
    for name in ["header.json", *(n for n in infos if n.startswith("samples/"))]:
        total += infos[name]
        if total > TOTAL_LIMIT:
            return name, total
    raise AssertionError("the archive stays under the limit")


@pytest.fixture
def lowered(monkeypatch):
    monkeypatch.setenv("LITMUS_LIMIT_MEMBER_BYTES", str(MEMBER_LIMIT))
    monkeypatch.setenv("LITMUS_LIMIT_ARCHIVE_BYTES", str(TOTAL_LIMIT))


def test_members_each_under_the_limit_are_refused_where_they_add_up_past_the_total(tmp_path, lowered):
    path = _archive(tmp_path / "many.eval", 40)
    assert path.stat().st_size < 64 << 10  # 7.5 MiB of samples in a few kilobytes
    member, total = _crossing(path)
    with pytest.raises(limits.LimitExceeded) as raised:
        InspectAdapter(use_inspect_ai=False).load(path)
    error = raised.value
    assert (error.file, error.field, error.limit) == (str(path), member, "archive_bytes")
    assert f"{total} bytes or more together, over the limit of {TOTAL_LIMIT}" in str(error)
    assert "\n" not in str(error) and "--limit archive_bytes=N" in str(error)


def test_an_archive_under_the_total_is_read_whole(tmp_path, lowered):
    path = _archive(tmp_path / "few.eval", TOTAL_LIMIT // MEMBER - 1)
    assert len(InspectAdapter(use_inspect_ai=False).load(path)) == TOTAL_LIMIT // MEMBER - 1


def test_memory_stays_near_the_total_limit_however_many_members_follow(tmp_path, lowered):
    path = _archive(tmp_path / "many.eval", 200)  # 37.5 MiB of samples, 19 times the total limit
    tracemalloc.start()
    try:
        with pytest.raises(InputError):
            InspectAdapter(use_inspect_ai=False).load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # what the limit lets in (bytes, their text, and the parsed samples) and one member being read; without
    # the total, every sample would be held: more than 37 MiB
    assert peak < 4 * TOTAL_LIMIT + 2 * MEMBER_LIMIT, peak


def test_the_claimed_sizes_are_checked_together_before_inspect_ais_reader(tmp_path, lowered):
    path = _archive(tmp_path / "many.eval", 40)
    member, total = _crossing(path)
    with pytest.raises(limits.LimitExceeded) as raised:
        _check_declared_sizes(path)
    assert (raised.value.field, raised.value.limit) == (member, "archive_bytes")
    assert f"{total} bytes together" in str(raised.value)


def test_one_line_on_the_command_line_and_the_limit_can_be_raised(tmp_path):
    _archive(tmp_path / "many.eval", 40)
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump({"name": "s", "world": {"principals": ["alice"], "files": {}},
                                        "policy": {"rules": []}, "trajectory": {"path": "many.eval", "format": "inspect"}}))
    lowered = ["--limit", f"member_bytes={MEMBER_LIMIT}", "--limit", f"archive_bytes={TOTAL_LIMIT}"]
    result = CliRunner().invoke(main, ["check", str(scenario), "--runtime", "inprocess", *lowered], env=NO_LIMITS)
    assert result.exit_code == 2
    [line] = [line for line in result.output.splitlines() if line.startswith("litmus-replay: error:")]
    member, _ = _crossing(tmp_path / "many.eval")
    assert "many.eval" in line and member in line and "archive_bytes" in line
    raised = CliRunner().invoke(main, ["check", str(scenario), "--runtime", "inprocess", "--limit",
                                       f"member_bytes={MEMBER_LIMIT}", "--limit", f"archive_bytes={8 * TOTAL_LIMIT}"],
                                env=NO_LIMITS)
    assert "archive_bytes" not in raised.output, raised.output


def test_in_a_batch_the_archive_is_one_input_error_line_and_the_batch_goes_on(tmp_path, lowered):
    worlds, runs, _ = _make_batch(tmp_path)
    _archive(runs / "many.eval", 40)
    member, _ = _crossing(runs / "many.eval")
    batch.run_batch([runs], worlds, tmp_path / "out", runtime="inprocess", reports=False)
    lines = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    [bad] = [line for line in lines if line["status"] == "input_error"]
    assert "many.eval" in json.dumps(bad) and member in bad["error"] and "archive_bytes" in bad["error"]
    assert len(lines) == PACK_RUNS + 1
