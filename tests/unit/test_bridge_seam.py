"""Bridges are found by seam, never by name: a world provider's class offers the benchmark's checks, its
versions and its settings, and nothing outside a bridge's own modules names a benchmark."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from litmus_replay.replay import worlds
from litmus_replay.replay.bridges import benchmark_checks, options_problem

ROOT = Path(__file__).resolve().parents[2]
# Each bridge's own modules, and the words that name its benchmark.
BRIDGES = {
    "agentdojo": ((ROOT / "replay" / "bridges" / "agentdojo", ROOT / "envs" / "bridges" / "agentdojo.py"), "agentdojo"),
    "tau2": ((ROOT / "replay" / "bridges" / "tau2", ROOT / "envs" / "bridges" / "tau2.py"), "tau2|τ²"),
}


@pytest.mark.parametrize("bridge", sorted(BRIDGES))
def test_no_module_outside_a_bridge_names_a_benchmark(bridge):
    modules, words = BRIDGES[bridge]
    named = []
    for path in sorted([*(ROOT / "replay").rglob("*.py"), *(ROOT / "envs").rglob("*.py")]):
        if any(path == module or module in path.parents for module in modules):
            continue
        named += [f"{path.relative_to(ROOT)}:{number}" for number, line in
                  enumerate(path.read_text(encoding="utf-8").splitlines(), start=1) if re.search(words, line)]
    assert named == []


class _Acme:
    """A second bridge: its class is all the seam needs."""

    name = "acme"
    checks_seen: list = []

    def world_for(self, trajectory):  # pragma: no cover - never asked here
        raise worlds.NoWorld("not needed")

    @staticmethod
    def benchmark_checks(result):
        _Acme.checks_seen.append(result)
        return {"utility": {"recorded": True, "replayed": False}}, {"calls": []}

    @staticmethod
    def known_versions():
        return ["2024.1", "2025.2"]

    @staticmethod
    def environment_problem():
        return None


@pytest.fixture()
def acme(monkeypatch):
    worlds.provider_factories()  # load the installed ones first, so the fake stands beside them
    monkeypatch.setitem(worlds._PROVIDERS, "acme", _Acme)
    _Acme.checks_seen.clear()
    return _Acme


def _replayed(*reports: dict) -> SimpleNamespace:
    return SimpleNamespace(reports={"real": {f"domain{index}": report for index, report in enumerate(reports)}})


def test_a_run_gets_the_checks_of_the_bridge_its_world_report_names(acme):
    result = _replayed({"benchmark": "acme", "utility": True})
    checks, drift = benchmark_checks(result)
    assert checks == {"utility": {"recorded": True, "replayed": False}} and drift == {"calls": []}
    assert acme.checks_seen == [result]


def test_a_world_no_bridge_served_has_no_benchmark_checks(acme):
    assert benchmark_checks(_replayed({"rows": 3})) is None
    assert benchmark_checks(_replayed({"benchmark": "nobody-installed-this"})) is None
    assert acme.checks_seen == []


def test_a_version_one_bridge_knows_passes_and_an_unknown_one_lists_each_bridges(acme):
    assert options_problem("2025.2") is None
    problem = options_problem("1999")
    assert problem.startswith("--benchmark-version: no installed benchmark has version '1999'")
    assert "acme knows 2024.1, 2025.2" in problem and "\n" not in problem


def test_a_bridges_bad_setting_is_its_own_line(acme, monkeypatch):
    monkeypatch.setattr(acme, "environment_problem", staticmethod(lambda: "ACME_RULES: /x.yaml: cannot read"))
    assert options_problem(None) == "ACME_RULES: /x.yaml: cannot read"
