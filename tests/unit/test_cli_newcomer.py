"""What a newcomer sees: a missing path fails before anything is written, a resumed batch says what was
already done, every command ends with a one-line tally or the path it wrote, the docker runtime says in
words what to install and start, and the quick start says what a bare machine skips."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from click.testing import CliRunner

from litmus_replay.envs.runtimes.docker import no_engine_message
from litmus_replay.replay.cli import main
from litmus_replay.replay.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "core" / "benign-run.yaml"
RUN_LINE = '{"id": "r1", "task": "benign", "principal": "alice", "turns": [{"calls": [{"tool": "get_profile", "arguments": {}}]}]}\n'


def _invoke(*args: str):
    return CliRunner().invoke(main, list(args))


def _batch(tmp_path: Path) -> tuple[Path, Path]:
    worlds, runs = tmp_path / "worlds", tmp_path / "runs"
    worlds.mkdir()
    runs.mkdir()
    (worlds / "benign.yaml").write_text("name: benign\nworld:\n  principals: [alice]\n  profiles: {alice: {email: a@example.com}}\n")
    (runs / "runs.jsonl").write_text(RUN_LINE)
    return worlds, runs


def test_revalidate_on_a_missing_path_fails_before_writing_anything(tmp_path):
    worlds, _ = _batch(tmp_path)
    out = tmp_path / "out"
    result = _invoke("revalidate", str(tmp_path / "nowhere"), "--worlds", str(worlds), "--out", str(out),
                     "--runtime", "inprocess")
    assert result.exit_code == 2
    assert result.stderr.strip() == f"litmus-replay: error: {tmp_path / 'nowhere'}: no such file or directory"
    assert result.stdout == "" and not out.exists()


def test_resuming_into_a_finished_out_says_how_many_runs_were_done_and_how_many_are_new(tmp_path):
    worlds, runs = _batch(tmp_path)
    args = ["revalidate", str(runs), "--worlds", str(worlds), "--out", str(tmp_path / "out"), "--runtime", "inprocess"]
    first = _invoke(*args)
    assert first.exit_code == 0, first.output
    assert "already done" not in first.stderr
    (runs / "more.jsonl").write_text(RUN_LINE.replace('"r1"', '"r2"'))
    second = _invoke(*args)
    assert second.exit_code == 0, second.output
    assert "1 of 2 runs already done there, 1 new to replay" in second.stderr
    third = _invoke(*args)
    assert "2 of 2 runs already done there, 0 new to replay" in third.stderr


def test_run_ends_with_a_tally_in_the_right_number(tmp_path):
    result = _invoke("run", str(SCENARIO), "--runtime", "inprocess", "-q")
    assert result.exit_code == 0, result.output
    last = result.stdout.strip().splitlines()[-1]
    [trajectory] = load_scenario(SCENARIO).trajectories
    calls = trajectory.call_count()
    classes = Counter(str(cls) for cls in load_scenario(SCENARIO).spec.expect.calls.values())
    tally = " · ".join(f"{cls} {count}" for cls, count in sorted(classes.items()))
    assert calls > 1 and sum(classes.values()) == calls, "the scenario states every call's class"
    assert last == f"1 trajectory · {calls} calls · {tally} · expectations 1/1 met", last
    report = tmp_path / "run.json"
    written = _invoke("run", str(SCENARIO), "--runtime", "inprocess", "-q", "--json", str(report))
    assert written.stdout.strip().splitlines()[-1] == f"wrote {report}" and report.exists()


def test_check_ends_with_a_tally():
    result = _invoke("check", str(SCENARIO), "--runtime", "inprocess")
    assert result.exit_code == 0, result.output
    assert result.stdout.strip().splitlines()[-1] == "1 trajectory checked · 1/1 met their expectations"


def test_graph_to_a_file_says_what_it_wrote(tmp_path):
    out = tmp_path / "graph.dot"
    result = _invoke("graph", str(SCENARIO), "--runtime", "inprocess", "--format", "dot", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert out.read_text().startswith(("digraph", "strict digraph"))
    assert result.stdout == ""  # stdout stays the graph's alone, for pipes
    assert re.fullmatch(rf"wrote {re.escape(str(out))} \(dot: benign-run/\S+, \d+ calls?\)", result.stderr.strip())


def test_without_a_docker_engine_the_message_says_what_to_install_and_how_to_start_it():
    failure = "Error while fetching server API version: ('Connection aborted.', FileNotFoundError(2, 'No such file'))"
    nothing = no_engine_message("unix:///var/run/docker.sock", failure, which=lambda name: None)
    assert "Docker is not installed here" in nothing and "apt-get install docker.io" in nothing
    assert "systemctl start docker" in nothing and "Connection aborted" not in nothing
    stopped = no_engine_message("unix:///var/run/docker.sock", failure, which=lambda name: f"/usr/bin/{name}")
    assert "installed but not running" in stopped and "Connection aborted" not in stopped
    assert "`dockerd &` as root" in stopped and "apt-get" not in stopped
    denied = no_engine_message("unix:///var/run/docker.sock", "PermissionError(13, 'Permission denied')",
                               which=lambda name: f"/usr/bin/{name}")
    assert "docker group" in denied and "dockerd" not in denied


def test_the_quick_start_says_what_a_bare_machine_skips_and_where_out_is_written():
    quick_start = (ROOT / "docs" / "quickstart.md").read_text()
    for needed in ("Docker engine", "Chromium", "--runtime inprocess", "`out/` under the current directory"):
        assert needed in quick_start, needed


def test_counts_take_their_noun_in_the_right_number():
    from litmus_replay.replay.report import plural

    assert [plural(n, "trajectory") for n in (0, 1, 2)] == ["0 trajectories", "1 trajectory", "2 trajectories"]
    assert [plural(n, "run") for n in (1, 3)] == ["1 run", "3 runs"]
    assert plural(2, "key") == "2 keys" and plural(2, "input error") == "2 input errors"
