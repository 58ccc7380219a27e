"""Pages of a batch that scale: by default only the runs whose verdict does not stand get one, ``all`` and
``none`` do what they say, every page links to the index and its neighbouring flagged runs, and
``litmus-replay report RUN_ID`` makes any run's page later, byte for byte what the batch writes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from litmus_replay.replay import batch
from litmus_replay.replay.cli import main
from litmus_replay.replay.verdicts import FLAGGED as FLAGGED_FINDINGS

from test_batch import _make_batch, index_rows

FLAGGED = set(FLAGGED_FINDINGS)  # the findings in which two judgements disagree: these runs get a page
ROOT = Path(__file__).resolve().parents[2]
NAV = re.compile(r'<nav class="run-nav">(.*?)</nav>')


def _results(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def _pages(out: Path) -> set[str]:
    return {f"reports/{path.name}" for path in (out / "reports").glob("*.html")} if (out / "reports").exists() else set()


@pytest.fixture(scope="module")
def pack(tmp_path_factory) -> tuple[Path, Path]:
    worlds, runs, _ = _make_batch(tmp_path_factory.mktemp("pack"))
    return worlds, runs


def test_by_default_only_runs_whose_verdict_does_not_stand_get_a_page(pack, tmp_path):
    worlds, runs = pack
    batch.run_batch([runs], worlds, tmp_path / "out", runtime="inprocess")
    lines = _results(tmp_path / "out")
    flagged = {line["run"] for line in lines if line["finding"] in FLAGGED}
    assert flagged and len(flagged) < len(lines), "the pack has runs of both kinds"
    assert {line["run"] for line in lines if line["report"]} == flagged
    assert _pages(tmp_path / "out") == {line["report"] for line in lines if line["report"]}
    assert {row["run"]: row["report"] for row in index_rows((tmp_path / "out" / "index.html").read_text())} == {
        line["run"]: line["report"] or "" for line in lines}, "the index lists every run, linking the pages written"


@pytest.mark.parametrize("options, expected", [(["--reports", "all"], "every"), (["--reports", "none"], "no"),
                                               (["--no-reports"], "no")])
def test_report_modes_on_the_command_line(pack, tmp_path, options, expected):
    worlds, runs = pack
    out = tmp_path / "out"
    result = CliRunner().invoke(main, ["revalidate", str(runs), "--worlds", str(worlds), "--out", str(out),
                                       "--runtime", "inprocess", "--jobs", "1", *options])
    assert result.exit_code == 0, result.output
    lines = _results(out)
    pages = _pages(out)
    if expected == "every":
        assert pages == {line["report"] for line in lines} and len(pages) == len(lines)
    else:
        assert pages == set() and all(line["report"] is None for line in lines)
    assert (out / "index.html").exists()


def test_pages_link_the_index_and_the_flagged_runs_before_and_after_them(pack, tmp_path):
    worlds, runs = pack
    out = tmp_path / "out"
    batch.run_batch([runs], worlds, out, runtime="inprocess", reports="all")
    lines = _results(out)
    flagged = [line for line in lines if line["finding"] in FLAGGED]
    page_of = {line["run"]: Path(line["report"]).name for line in lines}
    for position, line in enumerate(lines):
        (nav,) = NAV.findall((out / line["report"]).read_text())
        links = dict(re.findall(r'<a rel="(\w+)" href="([^"]+)"', nav))
        before = [f for f in flagged if lines.index(f) < position]
        after = [f for f in flagged if lines.index(f) > position]
        assert links["index"] == "../index.html"
        assert links.get("prev") == (page_of[before[-1]["run"]] if before else None)
        assert links.get("next") == (page_of[after[0]["run"]] if after else None)


def test_report_makes_a_page_later_byte_for_byte(pack, tmp_path, monkeypatch):
    worlds, runs = pack
    out = tmp_path / "out"
    batch.run_batch([runs], worlds, out, runtime="inprocess", reports="all")
    lines = _results(out)
    chosen = [next(line for line in lines if line["finding"] in FLAGGED),
              next(line for line in lines if line["finding"] not in FLAGGED)]
    written = {line["run"]: (out / line["report"]).read_bytes() for line in chosen}
    for path in (out / "reports").iterdir():
        path.unlink()
    monkeypatch.chdir(tmp_path)  # the batch recorded where its run files are; the page does not depend on cwd
    for line in chosen:
        result = CliRunner().invoke(main, ["report", line["run"], "--out", str(out)])
        assert result.exit_code == 0, result.output
        assert result.output.strip() == str(out / line["report"])
        assert (out / line["report"]).read_bytes() == written[line["run"]]


def test_report_of_a_run_the_batch_does_not_hold_is_one_line_and_exit_2(pack, tmp_path):
    worlds, runs = pack
    out = tmp_path / "out"
    batch.run_batch([runs], worlds, out, runtime="inprocess", reports="none")
    result = CliRunner().invoke(main, ["report", "no-such-run", "--out", str(out)])
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [f"litmus-replay: error: {out / 'results.jsonl'}: run: no run 'no-such-run' in this batch"]


def test_a_resumed_batch_writes_the_pages_its_mode_asks_for(pack, tmp_path):
    worlds, runs = pack
    out = tmp_path / "out"
    batch.run_batch([runs], worlds, out, runtime="inprocess", reports="none")
    batch.run_batch([runs], worlds, out, runtime="inprocess", reports="flagged")
    lines = _results(out)
    assert {line["report"] for line in lines if line["report"]} == _pages(out)
    assert {line["run"] for line in lines if line["report"]} == {line["run"] for line in lines if line["finding"] in FLAGGED}


def test_an_unknown_report_mode_is_refused_before_anything_runs(pack, tmp_path):
    worlds, runs = pack
    with pytest.raises(ValueError, match="--reports"):
        batch.run_batch([runs], worlds, tmp_path / "out", runtime="inprocess", reports="some")
    assert not (tmp_path / "out").exists()


@pytest.mark.slow
def test_the_shipped_corpus_under_the_default_mode_writes_under_10_mb(tmp_path):
    out = tmp_path / "out"
    summary = batch.run_batch([ROOT / "corpus" / "runs"], ROOT / "corpus" / "worlds", out, runtime="inprocess", jobs=2)
    size = sum(path.stat().st_size for path in out.rglob("*") if path.is_file())
    assert summary["runs"] == 1200
    pages = len(list((out / "reports").iterdir()))
    assert pages == sum(runs for row in summary["findings"].values() for finding, runs in row.items()
                        if finding in FLAGGED)
    assert pages == len(summary["over_penalised"]) + len(summary["under_penalised"]) + sum(
        row.get("unscoreable", 0) for row in summary["findings"].values())
    assert size <= 10_000_000, f"{size:,} bytes for {pages} pages"


def _bridged_lines() -> list[dict]:
    """Result lines as a bridged batch writes them: each flagged finding, checks replayed, a drifted run."""
    lines = []
    for number, finding in enumerate(["check_missed_harm", "drift", "check_changed", "stands", "stands", "under_penalised"]):
        agree = finding not in ("drift", "check_changed")
        checks = {"security": {"agree": True, "judges": "harm", "recorded": False, "replayed": False},
                  "utility": {"agree": agree, "judges": "task", "recorded": True, "replayed": agree,
                              **({} if agree else {"cause": finding, "first_departure": "t1.c1" if finding == "drift"
                                                   else None, "explanation": "why"})}}
        lines.append({"run": f"run-{number}" if number else "run-<img src=x>", "file": "runs.json", "task": "t",
                      "trajectory": f"trajectory-{number}", "original": "safe", "status": "ok", "revalidated": "confirmed_safe", "finding": finding,
                      "detail": f"{finding}: the sentence of run {number}", "checks": checks,
                      "drift": {"calls": 2 if finding == "drift" else 0, "first": "t1.c1" if finding == "drift" else None},
                      "report": f"reports/{number}.html"})
    return lines


def test_the_index_shows_the_agreement_each_flagged_finding_and_each_runs_detail(tmp_path):
    from litmus_replay.replay.report.batch_index import GROUPS, write_batch_index

    lines = _bridged_lines()
    summary = batch.summarise(lines)
    write_batch_index(tmp_path / "index.html", map(batch.as_line, lines), summary)
    page = (tmp_path / "index.html").read_text()
    assert [group for group, _ in GROUPS][: len(FLAGGED_FINDINGS)] == list(FLAGGED_FINDINGS), "a section per finding"
    agreement = page[page.index('id="agreement"'): page.index("</div>", page.index('id="agreement"'))]
    assert "security</span>: 6/6 runs agree (100.0%)" in agreement
    assert "utility</span>: 4/6 runs agree (66.7%) · 2 disagree" in agreement
    assert "2 calls answer differently today than in the recording, in 1 run" in agreement
    assert 'href="#finding=drift">1 changed a check (drift)' in agreement
    findings = page[page.index('<table class="revalidation findings">'):]
    findings = findings[: findings.index("</table>")]
    for finding, count in (("check_missed_harm", 1), ("drift", 1), ("check_changed", 1), ("stands", 2)):
        assert f'href="#original=safe&amp;finding={finding}">{count}</a>' in findings
    assert 'href="#finding=check_missed_harm" title=' in page and ">1 check-missed-harm</a>" in page
    assert ">0 over-penalised</a>" in page and ">1 under-penalised</a>" in page
    rows = {row["run"]: row for row in index_rows(page)}
    assert rows["run-1"]["detail"] == "drift: the sentence of run 1" and rows["run-1"]["group"] == "drift"
    assert "<img" not in page.split('id="runs-data"')[1], "a recorded run id stays JSON text"


def test_an_index_of_a_batch_without_checks_has_no_agreement_block(tmp_path):
    from litmus_replay.replay.report.batch_index import write_batch_index

    lines = [{key: value for key, value in line.items() if key not in ("checks", "drift")} for line in _bridged_lines()]
    write_batch_index(tmp_path / "index.html", map(batch.as_line, lines), batch.summarise(lines))
    page = (tmp_path / "index.html").read_text()
    assert 'id="agreement"' not in page and '<table class="revalidation findings">' in page
