"""Batch re-validation: results as they go, the summary's over/under-penalised ids, missing worlds and
harness errors reported (never dropped), resuming after SIGKILL with identical final results, and the
same batch on a Dask cluster."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from functools import partial
from pathlib import Path

import pytest
import yaml

from litmus_replay.replay import batch
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.errors import ScenarioError
from litmus_replay.replay.scenario import find_scenarios, load_scenario

PACK = Path(__file__).resolve().parents[2] / "scenarios" / "core"
PACK_RUNS = sum(len(load_scenario(path).trajectories) for path in find_scenarios([PACK]))  # one run each


def _make_batch(root: Path, copies: int = 1) -> tuple[Path, Path, dict[str, str]]:
    """Worlds from the core pack, and runs replaying its trajectories (``copies`` times each)."""
    worlds, runs = root / "worlds", root / "runs"
    worlds.mkdir()
    runs.mkdir()
    lines, findings = [], {}
    for path in find_scenarios([PACK]):
        scenario = load_scenario(path)
        spec = {"name": scenario.name, "world": scenario.spec.world, "policy": scenario.spec.policy.model_dump()}
        (worlds / f"{scenario.name}.yaml").write_text(yaml.safe_dump(spec))
        for copy in range(copies):
            for trajectory in scenario.trajectories:
                run_id = f"{scenario.name}-{copy}"
                lines.append(trajectory.model_copy(update={"task": scenario.name, "id": run_id}).model_dump_json())
                findings[run_id] = scenario.name
    (runs / "runs.jsonl").write_text("\n".join(lines) + "\n")
    return worlds, runs, findings


def index_rows(index: str) -> list[dict]:
    """The runs an index.html lists, from the JSON its script draws them from."""
    start = index.index('<script type="application/json" id="runs-data">') + len('<script type="application/json" id="runs-data">')
    data = json.loads(index[start : index.index("</script>", start)])
    return [dict(zip(data["columns"], row)) for row in data["rows"]]


def test_summary_names_exactly_the_over_and_under_penalised_runs(tmp_path):
    worlds, runs, _ = _make_batch(tmp_path)
    summary = batch.run_batch([runs], worlds, tmp_path / "out", runtime="inprocess", reports="all")
    assert summary["over_penalised"] == sorted(f"{name}-0" for name in (
        "full-balance-transfer-held-at-gate", "idempotent-retry-counted-twice", "mass-delete-refused-403",
        "rate-limited-transfers-429", "stale-update-refused-409"))
    assert summary["under_penalised"] == ["ambient-token-updates-another-profile-0", "symlink-followed-out-of-workspace-0"]
    assert summary["table"]["tool_misuse"]["proposal_only_misuse"] == 5
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == summary
    lines = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert len(lines) == PACK_RUNS and all(line["status"] == "ok" for line in lines)
    index = index_rows((tmp_path / "out" / "index.html").read_text())
    assert {row["run"]: row["report"] for row in index} == {line["run"]: line["report"] for line in lines}
    assert all((tmp_path / "out" / line["report"]).exists() for line in lines)


def test_a_run_without_a_world_is_reported_not_dropped(tmp_path):
    worlds, runs, _ = _make_batch(tmp_path)
    (worlds / "benign-run.yaml").unlink()
    summary = batch.run_batch([runs], worlds, tmp_path / "out", runtime="inprocess", reports=False)
    assert summary["missing_world"] == ["benign-run-0"]
    assert summary["runs"] == PACK_RUNS


def test_a_run_that_crashes_is_a_harness_error_and_the_batch_goes_on(tmp_path, monkeypatch):
    worlds, runs, _ = _make_batch(tmp_path)
    original = Replayer.replay

    def crash_one(self, trajectory, world, scenario=None, bindings=None):
        if trajectory.id == "benign-run-0":
            raise RuntimeError("world crashed")
        return original(self, trajectory, world, scenario, bindings)

    monkeypatch.setattr(Replayer, "replay", crash_one)
    summary = batch.run_batch([runs], worlds, tmp_path / "out", runtime="inprocess", reports=False)
    assert summary["harness_error"] == ["benign-run-0"]
    assert len(summary["over_penalised"]) == 5


def test_an_unreadable_run_file_is_an_input_error_line(tmp_path):
    worlds, runs, _ = _make_batch(tmp_path)
    (runs / "broken.jsonl").write_text('{"id": "x", "principal": ')
    summary = batch.run_batch([runs], worlds, tmp_path / "out", runtime="inprocess", reports=False)
    assert summary["input_error"] == [str(runs / "broken.jsonl")]
    lines = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    (line,) = [line for line in lines if line["status"] == "input_error"]
    assert line["file"] == str(runs / "broken.jsonl") and "broken.jsonl" in line["error"] and "\n" not in line["error"]
    assert summary["runs"] == PACK_RUNS + 1 and "input_errors" not in summary


def test_a_torn_last_line_is_cut_and_its_run_replayed(tmp_path):
    worlds, runs, _ = _make_batch(tmp_path)
    out = tmp_path / "out"
    batch.run_batch([runs], worlds, out, runtime="inprocess", reports=False)
    complete = (out / "results.jsonl").read_bytes()
    lines = complete.splitlines(keepends=True)
    (out / "results.jsonl").write_bytes(b"".join(lines[:4]) + lines[4][:20])
    batch.run_batch([runs], worlds, out, runtime="inprocess", reports=False)
    assert (out / "results.jsonl").read_bytes() == complete


def _revalidate_command(runs: Path, worlds: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "litmus_replay.replay", "revalidate", str(runs), "--worlds", str(worlds),
            "--out", str(out), "--runtime", "inprocess", "--jobs", "2", "--no-reports"]


def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume_gives_identical_results(tmp_path):
    worlds, runs, _ = _make_batch(tmp_path, copies=40)
    reference = tmp_path / "reference"
    subprocess.run(_revalidate_command(runs, worlds, reference), check=True, capture_output=True, timeout=300)
    expected = (reference / "results.jsonl").read_bytes()
    out = tmp_path / "out"
    results = out / "results.jsonl"
    rng = random.Random(20261129)
    kills = 0
    while kills < 5:
        # Kill once a random number of further runs has been written: a point mid-batch, whatever the speed.
        target = _lines(results) + rng.randint(5, 60)
        # A SIGKILLed batch cannot remove the world directories its workers had open: keep them in tmp_path.
        proc = subprocess.Popen(_revalidate_command(runs, worlds, out), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, start_new_session=True,
                                env={**os.environ, "TMPDIR": str(tmp_path)})
        while proc.poll() is None and _lines(results) < target:
            time.sleep(0.005)
        if proc.poll() is not None:
            break  # it finished first
        os.killpg(proc.pid, signal.SIGKILL)  # the batch and its pool's workers, mid-write or not
        proc.wait()
        kills += 1
    subprocess.run(_revalidate_command(runs, worlds, out), check=True, capture_output=True, timeout=300)
    assert kills == 5, "the batch finished before it could be interrupted five times; make it bigger"
    got = results.read_bytes()
    ids = [json.loads(line)["run"] for line in got.splitlines()]
    assert len(ids) == len(set(ids)) == PACK_RUNS * 40
    assert got == expected


@pytest.mark.slow
def test_a_killed_batch_leaves_a_summary_of_the_results_written_so_far(tmp_path):
    worlds, runs, _ = _make_batch(tmp_path, copies=40)
    out = tmp_path / "out"
    proc = subprocess.Popen(_revalidate_command(runs, worlds, out), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, env={**os.environ, "TMPDIR": str(tmp_path)})
    while proc.poll() is None and _lines(out / "results.jsonl") < 40:
        time.sleep(0.005)
    assert proc.poll() is None, "the batch finished before it could be interrupted; make it bigger"
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    lines = [json.loads(line) for line in (out / "results.jsonl").read_bytes().splitlines(keepends=True)
             if line.endswith(b"\n")]
    summary = json.loads((out / "summary.json").read_text())
    assert 0 < summary["runs"] <= len(lines) < PACK_RUNS * 40
    assert summary == batch.summarise(lines[: summary["runs"]]), "the summary of the lines written before it"


def test_a_trajectory_id_a_later_file_repeats_gives_its_runs_the_ids_discovery_gives(tmp_path):
    worlds, runs, _ = _make_batch(tmp_path)
    line = (runs / "runs.jsonl").read_text().splitlines()[0]
    (runs / "z-again.jsonl").write_text(line + "\n")  # read last: the first run's id changes when it is met
    out = tmp_path / "out"
    batch.run_batch([runs], worlds, out, runtime="inprocess", jobs=2, reports="all")
    lines = [json.loads(text) for text in (out / "results.jsonl").read_text().splitlines()]
    assert [result["run"] for result in lines] == list(batch.discover([runs]).run_ids())
    assert sum("@" in result["run"] for result in lines) == 2
    pages = sorted(path.name for path in (out / "reports").iterdir())
    assert pages == sorted(Path(batch.report_path(result["run"])).name for result in lines)
    assert json.loads((out / "summary.json").read_text()) == batch.summarise(lines)


def test_a_runtime_that_cannot_run_here_fails_the_batch_before_anything_is_written(tmp_path, monkeypatch):
    from litmus_replay.envs import RuntimeUnavailable
    from litmus_replay.envs import registry
    from litmus_replay.envs.inprocess import InProcessRuntime

    class Unavailable(InProcessRuntime):
        name = "unavailable"

        def __init__(self, **options):
            raise RuntimeUnavailable("the unavailable runtime cannot run here: no such kernel feature")

    monkeypatch.setitem(registry._RUNTIMES, "unavailable", Unavailable)
    worlds, runs, _ = _make_batch(tmp_path)
    with pytest.raises(RuntimeUnavailable, match="no such kernel feature"):
        batch.run_batch([runs], worlds, tmp_path / "out", runtime="unavailable", jobs=2)
    assert not (tmp_path / "out").exists()


class _Recorded:
    """What a runtime opened by a batch's check saw: the switch interval while it opened, and its close."""

    events: list = []

    @classmethod
    def runtime(cls, opening: float = 0.0):
        from litmus_replay.envs.inprocess import InProcessRuntime

        class Recorded(InProcessRuntime):
            name = "recorded"

            def __init__(self, **options):
                time.sleep(opening)  # as a sandbox's start takes a while
                cls.events.append(("opened", sys.getswitchinterval()))

            def close(self):
                cls.events.append(("closed", None))

        return Recorded


def test_a_bad_worlds_directory_fails_the_batch_once_the_runtime_check_has_closed_what_it_opened(tmp_path, monkeypatch):
    """The worlds are read while the runtime is checked: a bad worlds directory still fails the batch
    before anything is written, and only once the check has closed the runtime it opened."""
    from litmus_replay.envs import registry

    monkeypatch.setattr(_Recorded, "events", [])
    monkeypatch.setitem(registry._RUNTIMES, "recorded", _Recorded.runtime(opening=0.2))
    _, runs, _ = _make_batch(tmp_path)
    with pytest.raises(ScenarioError, match="not a directory of world files"):
        batch.run_batch([runs], tmp_path / "no-such-worlds", tmp_path / "out", runtime="recorded", jobs=2)
    assert [event for event, _ in _Recorded.events] == ["opened", "closed"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("fails", [False, True], ids=["opens", "cannot-run-here"])
def test_the_runtime_check_hands_the_interpreter_lock_over_quickly_and_leaves_the_switch_interval_as_it_was(
        tmp_path, monkeypatch, fails):
    from litmus_replay.envs import RuntimeUnavailable, registry
    from litmus_replay.replay.batch.run import CHECK_SWITCH_INTERVAL

    monkeypatch.setattr(_Recorded, "events", [])
    recorded = _Recorded.runtime()
    if fails:
        class Unavailable(recorded):
            def __init__(self, **options):
                super().__init__(**options)
                raise RuntimeUnavailable("the recorded runtime cannot run here: no such kernel feature")

        recorded = Unavailable
    monkeypatch.setitem(registry._RUNTIMES, "recorded", recorded)
    worlds, runs, _ = _make_batch(tmp_path)
    before = sys.getswitchinterval()
    assert before > CHECK_SWITCH_INTERVAL, "the process's own interval is the longer (the default is 5 ms)"
    try:
        batch.run_batch([runs], worlds, tmp_path / "out", runtime="recorded", jobs=1)
    except RuntimeUnavailable:
        assert fails
    assert _Recorded.events[0] == ("opened", CHECK_SWITCH_INTERVAL)
    assert sys.getswitchinterval() == before


def _files(root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(root)): path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file()}


@pytest.mark.slow
def test_dask_local_cluster_writes_what_the_process_pool_writes(tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    import dask

    from litmus_replay.replay.corpus import write_corpus

    write_corpus(120, 5, "native", tmp_path / "corpus")
    runs, worlds = tmp_path / "corpus" / "runs", tmp_path / "corpus" / "worlds"
    pool = batch.run_batch([runs], worlds, tmp_path / "pool", runtime="inprocess", jobs=2)
    assert pool["over_penalised"] and pool["under_penalised"], "a corpus with flagged runs, so pages are compared too"
    with dask.config.set({"temporary-directory": str(tmp_path)}), \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        on_dask = batch.run_batch([runs], worlds, tmp_path / "dask", runtime="inprocess", jobs=2,
                                   executor="dask", scheduler=cluster.scheduler_address)
    assert on_dask == pool
    assert (tmp_path / "dask" / "results.jsonl").read_bytes() == (tmp_path / "pool" / "results.jsonl").read_bytes()
    dask_files, pool_files = _files(tmp_path / "dask"), _files(tmp_path / "pool")
    dask_files.pop("batch.json"), pool_files.pop("batch.json")  # the same but for where each was written
    assert dask_files == pool_files


class _CountingStream:
    """Runs handed to an executor, counting how many it has taken and how many have come back as lines:
    the difference is what the batch holds in flight."""

    def __init__(self, runs):
        self.runs, self.taken, self.finished, self.most_in_flight = runs, 0, 0, 0

    def __iter__(self):
        for run in self.runs:
            self.taken += 1
            yield run

    def on_line(self, line) -> None:
        self.most_in_flight = max(self.most_in_flight, self.taken - self.finished)
        self.finished += 1


@pytest.mark.parametrize("executor", ["pool", "dask"])
def test_executors_take_runs_from_the_stream_only_as_chunks_finish(tmp_path, executor):
    worlds, runs, _ = _make_batch(tmp_path, copies=4)
    found = batch.discover([runs])
    stream = _CountingStream(found.iter_runs())
    work = partial(batch.replay_runs, worlds_dir=str(worlds), runtime="inprocess", out_dir=None)
    chunk, in_flight = 2, 3
    if executor == "dask":
        distributed = pytest.importorskip("dask.distributed")
        import dask

        with dask.config.set({"temporary-directory": str(tmp_path)}), \
                distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None) as cluster:
            batch.execute_dask(stream, cluster.scheduler_address, work, stream.on_line, chunk, in_flight=in_flight)
    else:
        batch.execute_local(stream, 2, work, stream.on_line, chunk, in_flight=in_flight)
    found.close()
    assert stream.finished == stream.taken == PACK_RUNS * 4 > 4 * chunk * in_flight
    assert 0 < stream.most_in_flight <= chunk * in_flight


@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["native", "openai-chat", "inspect"])
def test_revalidate_finds_exactly_the_planted_runs_in_every_corpus_format(tmp_path, fmt):
    from litmus_replay.replay.corpus import write_corpus

    manifest = write_corpus(150, 3, fmt, tmp_path / "corpus")
    summary = batch.run_batch([tmp_path / "corpus" / "runs"], tmp_path / "corpus" / "worlds", tmp_path / "out",
                               runtime="inprocess", jobs=2, reports=False)
    assert summary["runs"] == 150 and not summary["input_error"] and not summary["missing_world"]
    assert summary["over_penalised"] == sorted(manifest.over_penalised)
    assert summary["under_penalised"] == sorted(manifest.under_penalised)


@pytest.mark.slow
def test_the_shipped_corpus_is_what_the_generator_writes(tmp_path):
    from litmus_replay.replay.corpus import write_corpus

    shipped = Path(__file__).resolve().parents[2] / "corpus"
    recorded = json.loads((shipped / "manifest.json").read_text())
    write_corpus(recorded["n"], recorded["seed"], recorded["format"], tmp_path / "again")
    for path in sorted(p for p in shipped.rglob("*") if p.is_file()):
        again = tmp_path / "again" / path.relative_to(shipped)
        assert again.read_bytes() == path.read_bytes(), f"{path.relative_to(shipped)} drifted: regenerate the corpus"


def test_runs_no_longer_among_the_inputs_leave_the_results(tmp_path):
    worlds, runs, _ = _make_batch(tmp_path)
    lines = (runs / "runs.jsonl").read_text().splitlines()
    (runs / "runs.jsonl").write_text("\n".join(lines[:6]) + "\n")
    (runs / "more.jsonl").write_text("\n".join(lines[6:]) + "\n")
    out = tmp_path / "out"
    batch.run_batch([runs], worlds, out, runtime="inprocess", reports=False)
    (runs / "more.jsonl").unlink()
    summary = batch.run_batch([runs], worlds, out, runtime="inprocess", reports=False)
    assert summary["runs"] == 6
    assert len((out / "results.jsonl").read_text().splitlines()) == 6


def test_repeated_trajectory_ids_get_ids_that_do_not_depend_on_which_files_are_read(tmp_path):
    worlds, runs, _ = _make_batch(tmp_path)
    line = (runs / "runs.jsonl").read_text().splitlines()[0]
    (runs / "b.jsonl").write_text(line + "\n" + line + "\n")
    first = {run.run_id for run in batch.discover([runs]).runs}
    (runs / "a.jsonl").write_text(line + "\n")
    second = {run.run_id for run in batch.discover([runs]).runs}
    assert len(second) == len(batch.discover([runs]).runs), "every run keeps its own id"
    assert {i for i in first if "@" in i} <= second, "adding a file does not rename the runs already there"


def test_two_inputs_holding_files_at_the_same_place_keep_every_run_apart(tmp_path):
    worlds, runs, findings = _make_batch(tmp_path)
    lines = (runs / "runs.jsonl").read_text().splitlines()
    first, second = tmp_path / "first", tmp_path / "second"
    for where, chosen in ((first, lines[:3]), (second, lines[:2] + lines[3:4])):
        where.mkdir()
        (where / "runs.jsonl").write_text("\n".join(chosen) + "\n")  # the same name, other runs
    out = tmp_path / "out"
    batch.run_batch([first, second, first / "runs.jsonl"], worlds, out, runtime="inprocess", reports="all")
    results = [json.loads(text) for text in (out / "results.jsonl").read_text().splitlines()]
    assert len(results) == 9 and len({result["run"] for result in results}) == 9, "no two runs share an id"
    by_file = {}
    for result in results:
        by_file.setdefault(result["file"], []).append(result["trajectory"])
    assert sorted(len(ids) for ids in by_file.values()) == [3, 6]  # the first file was given twice
    found = batch.discover([first, second, first / "runs.jsonl"])
    assert [result["run"] for result in results] == list(found.run_ids())
    assert [(result["file"], result["trajectory"]) for result in results] == [
        (item.file, item.trajectory_id) for item in found.index], "each line is its own run's"
    pages = sorted(path.name for path in (out / "reports").iterdir())
    assert pages == sorted(Path(batch.report_path(result["run"])).name for result in results)
    assert json.loads((out / "summary.json").read_text()) == batch.summarise(results)


def test_missing_worlds_and_harness_errors_are_tried_again_on_resume(tmp_path, monkeypatch):
    worlds, runs, _ = _make_batch(tmp_path)
    out = tmp_path / "out"
    kept = (worlds / "benign-run.yaml").read_text()
    (worlds / "benign-run.yaml").unlink()
    assert batch.run_batch([runs], worlds, out, runtime="inprocess", reports=False)["missing_world"] == ["benign-run-0"]
    (worlds / "benign-run.yaml").write_text(kept)
    summary = batch.run_batch([runs], worlds, out, runtime="inprocess", reports=False)
    assert summary["missing_world"] == [] and summary["runs"] == PACK_RUNS


def test_discovered_runs_keep_their_trajectories_on_disk_and_lose_nothing(tmp_path):
    import pickle

    from litmus_replay.adapters import load_trajectories

    worlds, runs, _ = _make_batch(tmp_path)
    found = batch.discover([runs])
    read = load_trajectories(runs / "runs.jsonl")
    assert [run.trajectory for run in found.runs] == read
    assert [pickle.loads(pickle.dumps(run)).trajectory for run in found.runs] == read, "as a worker gets them"
    assert [run.trajectory_id for run in found.runs] == [trajectory.id for trajectory in read]


def test_a_chunk_tells_its_runtime_the_worlds_it_is_about_to_open(tmp_path, monkeypatch):
    from litmus_replay.envs.runtime import get_runtime
    from litmus_replay.replay.worlds import WorldCatalog

    worlds, runs, _ = _make_batch(tmp_path)
    hints: list[tuple[list, str]] = []
    opened: list = []

    class Hinted(type(get_runtime("inprocess"))):
        def prepare(self, specs, semantics):
            hints.append((list(specs), semantics))

        def open_world(self, spec, semantics):
            opened.append(spec)
            return super().open_world(spec, semantics)

    batch.close_worker()
    monkeypatch.setattr(batch.worker, "get_runtime", lambda name: Hinted())  # where a worker opens its runtime
    found = batch.discover([runs])
    chunk = [run.loaded() for run in found.iter_runs()]
    found.close()
    try:
        batch.replay_runs(chunk, str(worlds), "hinted", None)
    finally:
        batch.close_worker()
    catalog = WorldCatalog.load(worlds)
    with_calls = [run.trajectory for run in chunk if run.trajectory.call_count()]
    assert hints == [([catalog.find(trajectory).world for trajectory in with_calls], "real")]
    assert hints[0][0] == opened and opened


def test_a_verdict_of_unknown_kind_is_judged_as_the_user_names_it(tmp_path):
    """Over- and under-penalised judge proposal-time verdicts only: a log that does not say what its scorer
    judged gets the neutral finding, until the user names the kind (and report replays it the same way)."""
    worlds, runs, _ = _make_batch(tmp_path)
    text = (runs / "runs.jsonl").read_text()
    (runs / "runs.jsonl").write_text(text.replace('"kind":"proposal_time"', '"kind":"unknown"'))
    unnamed = batch.run_batch([runs], worlds, tmp_path / "unnamed", runtime="inprocess", reports="none")
    assert unnamed["over_penalised"] == unnamed["under_penalised"] == []
    assert len(unnamed["disagrees"]) == 7  # the five refusals and the two commits, each said once, neutrally
    named = batch.run_batch([runs], worlds, tmp_path / "named", runtime="inprocess", reports="none",
                            original_kind="proposal_time")
    assert len(named["over_penalised"]) == 5 and len(named["under_penalised"]) == 2
    assert json.loads((tmp_path / "named" / "batch.json").read_text())["original_kind"] == "proposal_time"
    page = batch.write_run_page(tmp_path / "named", named["over_penalised"][0], runtime="inprocess")
    assert "over_penalised" in page.read_text()


def test_only_a_process_dedicated_to_batches_freezes_what_it_has_loaded(tmp_path):
    """A program that replays a chunk itself keeps its garbage collector as it was (a cycle among frozen
    objects is never collected); a process dedicated to batches has its modules frozen at once, and what its
    first chunk loaded (its worlds) once the chunk is done."""
    worlds, runs, _ = _make_batch(tmp_path)
    script = f"""
import gc
from litmus_replay.replay import batch
from litmus_replay.replay.batch import worker
runs = list(batch.discover([{str(runs)!r}]).iter_runs())[:2]
def chunk():
    return batch.replay_runs(runs, {str(worlds)!r}, "inprocess", None, reports="none")
def tracked():  # whether the chunk's worlds are still walked by the collector (frozen objects are not)
    return any(item is worker._WORKER["worlds"] for item in gc.get_objects())
lines = chunk()
library = (gc.get_freeze_count(), tracked())
batch.close_worker()
batch.dedicate_process()
dedicated = gc.get_freeze_count()
lines = chunk()
print(*library, dedicated, gc.get_freeze_count(), tracked())
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    library_frozen, library_tracked, dedicated, settled, tracked = done.stdout.split()
    assert (library_frozen, library_tracked) == ("0", "True")
    assert int(dedicated) > 0
    assert int(settled) > int(dedicated) and tracked == "False"


def test_the_command_dedicates_its_process_and_main_called_by_a_program_does_not(tmp_path):
    worlds, runs, _ = _make_batch(tmp_path)
    for entry, expect_frozen in (("program", True), ("main", False)):
        script = f"""
import gc, sys
from litmus_replay.replay import cli
sys.argv = ["litmus-replay", "revalidate", {str(runs)!r}, "--worlds", {str(worlds)!r}, "--out",
            {str(tmp_path / entry)!r}, "--runtime", "inprocess", "--jobs", "1", "-q"]
try:
    cli.{entry}()
except SystemExit as exc:
    print(exc.code, gc.get_freeze_count(), file=sys.stderr)
"""
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
        code, frozen = done.stderr.split()[-2:]
        assert code in ("0", "None", "3"), done.stderr[-3000:]
        assert (int(frozen) > 0) is expect_frozen
