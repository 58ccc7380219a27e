"""The batch index in headless Chromium, given an address it cannot follow: an unknown filter value
(``#finding=bogus``) or an unknown filter says so in a visible line naming the filter and the valid
values; a known value, even one no run has, shows no such line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from litmus_replay.replay.batch import as_line, summarise
from litmus_replay.replay.report.batch_index import write_batch_index

from test_html_report import _browser, dump_dom

LINES = [
    {"run": "r1", "file": "runs.jsonl", "trajectory": "r1", "task": "bank/t1", "original": "tool_misuse", "status": "ok",
     "revalidated": "proposal_only_misuse", "finding": "over_penalised", "report": None},
    {"run": "r2", "file": "runs.jsonl", "trajectory": "r2", "task": "bank/t2", "original": "safe", "status": "ok",
     "revalidated": "confirmed_safe", "finding": "stands", "report": None},
]


@pytest.fixture(scope="module")
def chromium() -> str:
    return _browser()


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("index") / "index.html"
    write_batch_index(path, map(as_line, LINES), summarise(LINES))
    return path


def _problem(chromium: str, page: Path, profile: Path, fragment: str) -> tuple[str | None, str]:
    """The problem line's text (None while hidden) and the count of matching runs the page shows."""
    dom = dump_dom(chromium, page, profile, fragment)
    found = re.search(r'<p class="problems" id="filter-problem"([^>]*)>(.*?)</p>', dom, re.S)
    assert found, "the page has its problem line"
    matching = re.search(r'<span id="matching"[^>]*>(.*?)</span>', dom).group(1)
    return (None if "hidden" in found.group(1) else found.group(2)), matching


def test_an_unknown_value_says_so_with_the_valid_ones(chromium, index, tmp_path):
    text, matching = _problem(chromium, index, tmp_path / "profile", "#finding=bogus")
    assert matching == "0 of 2 runs"
    assert text is not None and "unknown value for the filter finding: “bogus”" in text
    assert "over_penalised" in text and "under_penalised" in text and "stands" in text


def test_an_unknown_filter_says_so(chromium, index, tmp_path):
    text, matching = _problem(chromium, index, tmp_path / "profile", "#findings=over_penalised")
    assert text is not None and "unknown filter “findings”" in text and "class, finding, task, original" in text
    text, _ = _problem(chromium, index, tmp_path / "profile", "#task=bank/t9")
    assert text is not None and "valid values: bank/t1, bank/t2" in text


@pytest.mark.parametrize("fragment, shown", [("#finding=over_penalised", "1 of 2 runs"),
                                             ("#finding=under_penalised", "0 of 2 runs"),  # known, no run has it
                                             ("#class=missing_world&sort=task&desc=1", "0 of 2 runs"),
                                             ("", "2 of 2 runs")])
def test_a_known_value_shows_no_problem(chromium, index, tmp_path, fragment, shown):
    text, matching = _problem(chromium, index, tmp_path / "profile", fragment)
    assert text is None and matching == shown
