"""The Python API: its examples run as written (doctest, from the checkout's root, where they name its
files), ``litmus_replay`` re-exports exactly it, and bad input is the command line's one line as an
exception."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

import litmus_replay
from litmus_replay.replay import api

ROOT = Path(__file__).resolve().parents[2]


def test_the_api_examples_pass_as_doctests(monkeypatch):
    monkeypatch.chdir(ROOT)
    result = doctest.testmod(api, optionflags=doctest.ELLIPSIS, report=True)
    assert result.attempted >= 10, "the examples are collected"
    assert result.failed == 0


def test_litmus_replay_re_exports_the_api_and_nothing_else_of_it():
    assert set(litmus_replay.__all__) == {"__version__", *api.__all__}
    for name in api.__all__:
        assert getattr(litmus_replay, name) is getattr(api, name)
    with pytest.raises(AttributeError):
        litmus_replay.run_batch  # noqa: B018 - the batch's internals are not the API


def test_bad_input_raises_one_line_naming_the_file(tmp_path):
    bad = tmp_path / "runs.json"
    bad.write_text("{not json")
    with pytest.raises(api.InputError) as raised:
        api.read_trajectories(bad, "native")
    assert raised.value.line().startswith(str(bad)) and "\n" not in raised.value.line()
    with pytest.raises(api.InputError, match="format"):
        api.read_trajectories(bad, "no-such-format")
    with pytest.raises(api.InputError, match="no results here"):
        api.read_results(tmp_path)


def test_a_run_without_a_world_says_which_keys_were_tried():
    [run] = [run for run in api.read_trajectories(ROOT / "corpus/runs/corpus-0001.eval")][:1]
    with pytest.raises(api.NoWorld, match="tried 'profiles-portal'"):
        api.find_world(run, None)


def test_replay_keeps_a_runtime_the_caller_opened_open():
    from litmus_replay.envs.runtime import get_runtime

    scenario = api.load_scenario(ROOT / "scenarios/core/mass-delete-refused-403.yaml")
    with get_runtime("inprocess") as runtime:
        first = api.replay_run(scenario.trajectories[0], scenario, runtime)
        second = api.replay_run(scenario.trajectories[0], scenario.task_world, runtime)
    assert first.classes == second.classes
    assert first.problems == [] and second.problems is None  # only a scenario states expectations


def test_a_batchs_notes_reach_a_program_as_warnings_of_the_litmus_replay_logger(caplog):
    from litmus_replay.replay.batch import Progress

    with caplog.at_level("WARNING", logger="litmus_replay"):
        Progress().notice("the sandbox isolates less here")
    assert [(record.name, record.getMessage()) for record in caplog.records] == [
        ("litmus_replay", "the sandbox isolates less here")]


@pytest.mark.slow
def test_the_readmes_python_example_runs_as_shown(tmp_path, monkeypatch):
    import re

    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    assert blocks, "the README shows the API"
    (tmp_path / "corpus").symlink_to(ROOT / "corpus")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - the project's own README
    assert namespace["summary"].runs == 1200
    assert sorted(namespace["flagged"]) == namespace["summary"].over_penalised
