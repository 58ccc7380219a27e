"""The batch index in a real browser, at the size of AgentDojo's published history (36,679 runs): headless
Chromium loads it without a console message; it leads with the over-penalised, under-penalised and
unscoreable runs, each group with its count, then the rest; filters and sort (kept in the address) show
exactly the runs they should; recorded run ids stay text. A screenshot is left in
``build/test-artifacts/`` for a person to look at.
"""

from __future__ import annotations

import random
from html.parser import HTMLParser
from pathlib import Path

import pytest

from litmus_replay.replay.batch import as_line, summarise
from litmus_replay.replay.report.batch_index import GROUPS, index_group, write_batch_index

from test_html_report import browser, dump_dom, screenshot  # noqa: F401  (browser: a fixture)

RUNS = 36_679
WINDOW = 200  # rows a group shows before "show more"
FINDINGS = {  # finding -> (re-validated class, original verdict)
    "over_penalised": ("proposal_only_misuse", "tool_misuse"),
    "under_penalised": ("commit_only_misuse", "safe"),
    "unscoreable": ("unscoreable", "safe"),
    "stands": ("confirmed_safe", "safe"),
    "stands_for_another_reason": ("commit_only_misuse", "tool_misuse"),
}
HOSTILE = '<img src=x onerror="document.title=1">'


def _lines(count: int) -> list[dict]:
    rng = random.Random(36679)
    lines = []
    for number in range(count):
        run = f"run-{number:05d}" if number != 7 else f"run-{HOSTILE}"
        task = f"agentdojo/{rng.choice(['workspace', 'banking', 'slack', 'travel'])}/user_task_{rng.randrange(40)}"
        roll = rng.random()
        if roll < 0.003:
            lines.append({"run": run, "file": "runs.jsonl", "trajectory": run, "task": task, "original": "safe",
                          "status": "missing_world", "error": f"no world for task {task!r}"})
            continue
        finding = ("over_penalised" if roll < 0.02 else "under_penalised" if roll < 0.025 else
                   "unscoreable" if roll < 0.04 else "stands_for_another_reason" if roll < 0.1 else "stands")
        revalidated, original = FINDINGS[finding]
        flagged = finding in ("over_penalised", "under_penalised", "unscoreable")
        lines.append({"run": run, "file": "runs.jsonl", "trajectory": run, "task": task, "original": original,
                      "status": "ok", "revalidated": revalidated, "finding": finding,
                      "report": f"reports/{number}.html" if flagged else None})
    return lines


@pytest.fixture(scope="module")
def index(tmp_path_factory) -> tuple[Path, list[dict]]:
    lines = _lines(RUNS)
    path = tmp_path_factory.mktemp("index") / "index.html"
    write_batch_index(path, map(as_line, lines), summarise(lines))
    return path, lines


class _Groups(HTMLParser):
    """The groups the script drew: their order and counts, and the runs each shows, as the DOM holds them."""

    def __init__(self) -> None:
        super().__init__()
        self.groups: list[tuple[str, int]] = []
        self.rows: dict[str, list[str]] = {}
        self.links: dict[str, str] = {}
        self.elements: list[str] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.elements.append(tag)
        if tag == "section" and "data-group" in attributes:
            self.groups.append((attributes["data-group"], int(attributes["data-count"])))
            self.rows[attributes["data-group"]] = []
        elif tag == "tr" and "data-run" in attributes:
            self.rows[self.groups[-1][0]].append(attributes["data-run"])
            self._run = attributes["data-run"]
        elif tag == "a" and self.groups and getattr(self, "_run", None):
            self.links[self._run] = attributes.get("href", "")


def _open(browser: str, page: Path, profile: Path, fragment: str = "") -> _Groups:
    dom = dump_dom(browser, page, profile, fragment)
    groups = _Groups()
    groups.feed(dom)
    return groups


def _expected(lines: list[dict], **filters: str) -> dict[str, list[str]]:
    keys = {"class": lambda l: l.get("revalidated") or l["status"], "finding": lambda l: l.get("finding") or "",
            "task": lambda l: l["task"], "original": lambda l: l.get("original") or "none"}
    picked = [line for line in lines if all(keys[key](line) == value for key, value in filters.items())]
    return {group: [line["run"] for line in picked if index_group(as_line(line)) == group] for group, _ in GROUPS}


def test_the_index_leads_with_what_changed_each_group_with_its_count(browser, index, tmp_path):
    path, lines = index
    page = _open(browser, path, tmp_path / "profile")
    expected = _expected(lines)
    assert [group for group, _ in page.groups] == [group for group, _ in GROUPS]
    assert page.groups == [(group, len(expected[group])) for group, _ in GROUPS]
    for group, runs in expected.items():
        assert page.rows[group] == runs[:WINDOW], f"{group}: the first rows in the batch's order"
    flagged = [line for line in lines if line.get("report")]
    shown = set(page.rows["over_penalised"] + page.rows["under_penalised"] + page.rows["unscoreable"])
    assert all(page.links[line["run"]] == line["report"] for line in flagged if line["run"] in shown)
    assert "img" not in page.elements, "a recorded run id is text, never markup"


@pytest.mark.parametrize("filters", [
    {"finding": "under_penalised"},
    {"class": "commit_only_misuse", "original": "tool_misuse"},
    {"task": "agentdojo/banking/user_task_3"},
    {"class": "missing_world"},
])
def test_filters_in_the_address_show_exactly_their_runs(browser, index, tmp_path, filters):
    path, lines = index
    from urllib.parse import quote

    fragment = "#" + "&".join(f"{key}={quote(value, safe='')}" for key, value in filters.items())
    page = _open(browser, path, tmp_path / "profile", fragment)
    expected = _expected(lines, **filters)
    assert page.groups == [(group, len(expected[group])) for group, _ in GROUPS]
    assert page.rows == {group: runs[:WINDOW] for group, runs in expected.items()}


def test_sorting_by_a_column_orders_every_group(browser, index, tmp_path):
    path, lines = index
    page = _open(browser, path, tmp_path / "profile", "#sort=task&desc=1")
    expected = _expected(lines)
    task = {line["run"]: line["task"] for line in lines}
    order = {line["run"]: position for position, line in enumerate(lines)}
    for group, runs in expected.items():
        ranked = sorted(runs, key=lambda run: order[run])
        ranked.sort(key=lambda run: task[run], reverse=True)  # stable: ties keep the batch's order
        assert page.rows[group] == ranked[:WINDOW], group


def test_index_screenshot_for_review(browser, index, tmp_path):
    path, _ = index
    screenshot(browser, path, tmp_path / "profile", "batch-index-36679-runs.png", "1400,1100")
