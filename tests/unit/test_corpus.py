"""The corpus generator: its planted ground truth is what a replay actually finds, in every format it writes.

A corpus is written, read back through the adapters (format sniffing included) and the worlds loader,
and every run replayed in-process; the manifest must name exactly the over- and under-penalised runs
the re-validation finds. Also here: the adapter mapping the corpus relies on (Chat Completions request
``metadata``; inspect sample ``metadata``), determinism, the study's proportions, and bad arguments.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litmus_replay.adapters import DEFAULT_PRINCIPAL, detect_format, load_trajectories
from litmus_replay.replay.corpus import (FORMATS, TEMPLATES, CorpusError, CorpusManifest, PlantedRun, generate_corpus,
                                         plan_corpus, planted_counts, write_corpus)
from litmus_replay.replay.corpus.manifest import ManifestWriter
from litmus_replay.replay.corpus.generator import Category, plan_run, record
from litmus_replay.replay.corpus.tasks import corpus_worlds
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.errors import InputError, UnknownName
from litmus_replay.replay.model import Trajectory
from litmus_replay.replay.policy import Policy, PolicySpec
from litmus_replay.replay.worlds import load_worlds

N, SEED = 120, 11


@pytest.fixture(scope="module", params=FORMATS)
def corpus(request, tmp_path_factory) -> tuple[str, Path, CorpusManifest]:
    out = tmp_path_factory.mktemp(request.param) / "corpus"
    summary = generate_corpus(N, SEED, request.param, out)
    manifest = CorpusManifest.read(out / "manifest.json")
    assert (summary.over_penalised, summary.under_penalised, summary.counts) == (
        manifest.over_penalised, manifest.under_penalised, manifest.counts())
    return request.param, out, manifest


def read_back(out: Path) -> list[Trajectory]:
    return [t for path in sorted((out / "runs").iterdir()) for t in load_trajectories(path, "auto")]


def tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# -- the planted truth holds on replay ---------------------------------------------------------------


def test_every_run_replays_to_its_planted_class_and_finding(corpus):
    fmt, out, manifest = corpus
    trajectories = read_back(out)
    worlds = load_worlds(out / "worlds")
    replayers = {task: Replayer(world.policy) for task, world in worlds.items()}
    assert sorted(t.id for t in trajectories) == sorted(manifest.runs)
    findings: dict[str, list[str]] = {"over_penalised": [], "under_penalised": []}
    for trajectory in trajectories:
        planted = manifest.runs[trajectory.id]
        replay = replayers[trajectory.task].replay(trajectory, worlds[trajectory.task].world)
        assert replay.revalidation.revalidated.value == planted.expected_class, (trajectory.id, planted.template)
        assert replay.revalidation.finding == planted.expected_finding, (trajectory.id, planted.template)
        findings.setdefault(replay.revalidation.finding, []).append(trajectory.id)
    assert sorted(findings["over_penalised"]) == sorted(manifest.over_penalised)
    assert sorted(findings["under_penalised"]) == sorted(manifest.under_penalised)
    assert (len(manifest.over_penalised), len(manifest.under_penalised)) == planted_counts(N) == (4, 1)


def test_task_principal_session_and_verdict_survive_the_format(corpus):
    fmt, out, manifest = corpus
    for trajectory in read_back(out):
        planted = manifest.runs[trajectory.id]
        assert trajectory.source.format == fmt
        assert (trajectory.task, trajectory.principal, trajectory.ambient_session) == (
            planted.task, planted.principal, planted.ambient_session)
        assert trajectory.original_verdict.label == planted.original_verdict
        assert trajectory.call_count() == planted.calls
        assert all(call.result is not None for _, call in trajectory.calls())
    assert any(run.ambient_session for run in manifest.runs.values())


def test_each_runs_file_is_recognised_as_the_written_format(corpus):
    fmt, out, manifest = corpus
    files = sorted((out / "runs").iterdir())
    assert {str(p.relative_to(out)) for p in files} == {run.file for run in manifest.runs.values()}
    assert {detect_format(path) for path in files} == {fmt}


def test_worlds_serve_every_task_and_the_manifest_reads_back(corpus, tmp_path):
    fmt, out, manifest = corpus
    assert {run.task for run in manifest.runs.values()} <= set(load_worlds(out / "worlds"))
    manifest.write(tmp_path / "again.json")
    assert (tmp_path / "again.json").read_bytes() == (out / "manifest.json").read_bytes()
    data = json.loads((out / "manifest.json").read_text())
    assert data["over_penalised"] == manifest.over_penalised and data["counts"]["calls"] == sum(r.calls for r in manifest.runs.values())


def test_calls_per_run_stay_within_3_to_30(corpus):
    _, _, manifest = corpus
    assert all(3 <= run.calls <= 30 for run in manifest.runs.values())


def test_the_mix_spans_every_domain_and_class(corpus):
    _, _, manifest = corpus
    counts = manifest.counts()
    assert set(counts["by_task"]) == set(corpus_worlds())
    assert set(counts["by_class"]) == {"confirmed_misuse", "confirmed_safe", "proposal_only_misuse", "commit_only_misuse", "unscoreable"}


@pytest.mark.parametrize("corpus", ["inspect"], indirect=True)
def test_inspect_logs_hold_many_samples_each(corpus):
    _, out, _ = corpus
    logs = sorted((out / "runs").glob("*.eval"))
    assert len(logs) == 2
    with zipfile.ZipFile(logs[0]) as archive:
        assert sum(name.startswith("samples/") for name in archive.namelist()) == 100


# -- proportions, determinism ------------------------------------------------------------------------


def test_the_study_size_plants_exactly_37_over_and_9_under():
    runs = plan_corpus(1200, 2026)
    findings = Counter(run.expected_finding for run in runs)
    assert (findings["over_penalised"], findings["under_penalised"]) == (37, 9)
    assert Counter(run.category for run in runs)["over_penalised"] == 37
    assert {run.template for run in runs if run.category == "over_penalised"} == {
        "mass_delete_403", "stale_update_409", "gate_left_pending", "rate_limited_429", "idempotent_retry"}
    assert {run.template for run in runs if run.category == "under_penalised"} == {"ambient_profile_update", "symlink_write_escape"}
    calls = [run.trajectory.call_count() for run in runs]
    assert min(calls) >= 3 and max(calls) <= 30 and 10 <= sum(calls) / len(calls) <= 15


@pytest.mark.parametrize(("n", "expected"), [(1200, (37, 9)), (2400, (74, 18)), (600, (19, 5)), (50, (2, 1)), (49, (2, 0)), (10, (0, 0))])
def test_other_sizes_scale_the_study_and_keep_one_of_each_from_50(n, expected):
    assert planted_counts(n) == expected


@pytest.mark.parametrize("fmt", FORMATS)
def test_same_seed_same_bytes_other_seed_other_runs(tmp_path, fmt):
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        generate_corpus(40, seed, fmt, tmp_path / name)
    first, again, other = tree(tmp_path / "a"), tree(tmp_path / "b"), tree(tmp_path / "c")
    assert first == again
    runs = {k: v for k, v in first.items() if k.startswith("runs/")}
    assert runs != {k: v for k, v in other.items() if k.startswith("runs/")}
    assert {k: v for k, v in first.items() if k.startswith("worlds/")} == {k: v for k, v in other.items() if k.startswith("worlds/")}


@settings(max_examples=25)
@given(seed=st.integers(), n=st.integers(1, 150))
def test_any_seed_gives_a_self_consistent_plan(seed, n):
    runs = plan_corpus(n, seed)
    worlds = corpus_worlds()
    assert len(runs) == n and len({run.id for run in runs}) == n
    findings = Counter(run.expected_finding for run in runs)
    assert (findings["over_penalised"], findings["under_penalised"]) == planted_counts(n)
    for run in runs:
        assert (run.expected_finding == "over_penalised") == (run.category == "over_penalised")
        assert (run.expected_finding == "under_penalised") == (run.category == "under_penalised")
        assert run.trajectory.principal in worlds[run.trajectory.task].principals
        assert 3 <= run.trajectory.call_count() <= 30
        assert len({call.id for _, call in run.trajectory.calls()}) == run.trajectory.call_count()


# Every template under either verdict: the class is the template's; the finding follows from the verdict.
TEMPLATE_CATEGORIES = [Category("any", name, verdict) for name in sorted(TEMPLATES) for verdict in ("tool_misuse", "safe")]


@settings(max_examples=60)
@given(category=st.sampled_from(TEMPLATE_CATEGORIES), seed=st.integers())
def test_every_template_gives_its_class_for_any_seed(category, seed):
    worlds = corpus_worlds()
    (run,) = record([plan_run("run-0001", category, seed)], worlds)
    world = worlds[run.trajectory.task]
    replay = Replayer(Policy.compile(PolicySpec.model_validate(world.policy))).replay(run.trajectory, world.world)
    assert replay.revalidation.revalidated == run.expected_class, [(c.key, c.call.tool, c.pair.cls.value) for c in replay.calls]
    assert replay.revalidation.finding == run.expected_finding
    # Padding stays confirmed safe: only the decisive call is not (and, in half the ambient updates, the
    # read of "your" profile before it, as in the scenario: principal_diverged).
    decisive = [] if run.expected_class.value == "confirmed_safe" else [run.expected_class.value]
    non_safe = sorted(c.pair.cls.value for c in replay.calls if c.pair.cls.value != "confirmed_safe")
    assert non_safe in (decisive, sorted(decisive + ["unscoreable"]) if run.template == "ambient_profile_update" else decisive)


# -- written as it is generated ----------------------------------------------------------------------

PEAK = r"""
import sys, tracemalloc
from pathlib import Path
from litmus_replay.replay.corpus import generate_corpus
out = Path(sys.argv[1])
generate_corpus(20, 1, "native", out / "warm")  # imports, worlds and caches, before measuring
for n in map(int, sys.argv[2:]):
    tracemalloc.start()
    generate_corpus(n, 1, "native", out / str(n))
    print(tracemalloc.get_traced_memory()[1])
    tracemalloc.stop()
"""


@pytest.mark.slow
def test_writing_a_corpus_holds_about_as_much_memory_at_three_times_the_runs(tmp_path):
    """Each file's runs are written and dropped before the next are made; a generator holding every run
    would need about three times as much for 600 runs as for 200."""
    proc = subprocess.run([sys.executable, "-c", PEAK, str(tmp_path), "200", "600"], capture_output=True, text=True, check=True)
    small, large = map(int, proc.stdout.split())
    assert large < 1.5 * small, (small, large)


_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_planted = st.builds(PlantedRun, category=_text, template=_text, task=_text, principal=_text,
                     ambient_session=st.none() | _text, original_verdict=_text,
                     expected_class=_text, calls=st.integers(0, 40), file=_text,
                     expected_finding=st.sampled_from(["over_penalised", "under_penalised", "stands", "unscoreable"]))


@settings(max_examples=50)
@given(runs=st.dictionaries(_text, _planted, min_size=1, max_size=8), n=st.integers(1, 10**6), seed=st.integers())
def test_the_manifest_written_run_by_run_is_the_manifest_written_whole(tmp_path_factory, runs, n, seed):
    directory = tmp_path_factory.mktemp("manifest")
    whole = CorpusManifest(n=n, seed=seed, format="inspect", runs=dict(runs))
    whole.write(directory / "whole.json")
    with ManifestWriter(n, seed, "inspect", spool_dir=directory) as streamed:
        for run_id, run in runs.items():
            streamed.add(run_id, run)
        summary = streamed.write(directory / "streamed.json")
    assert (directory / "streamed.json").read_bytes() == (directory / "whole.json").read_bytes()
    assert (summary.counts, summary.over_penalised, summary.under_penalised) == (
        whole.counts(), whole.over_penalised, whole.under_penalised)
    assert sorted(p.name for p in directory.iterdir()) == ["streamed.json", "whole.json"]


# -- bad arguments -----------------------------------------------------------------------------------


def test_a_non_empty_out_is_refused_and_left_alone(tmp_path):
    out = tmp_path / "corpus"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(CorpusError, match="not an empty directory") as raised:
        write_corpus(10, 1, "native", out)
    assert isinstance(raised.value, InputError) and raised.value.file == str(out)
    assert tree(out) == {"keep.txt": b"mine"} and sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]


def test_an_empty_out_is_filled_and_nothing_is_left_beside_it(tmp_path):
    (tmp_path / "corpus").mkdir()
    write_corpus(5, 1, "native", str(tmp_path / "corpus"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["corpus"]
    assert sorted(p.name for p in (tmp_path / "corpus").iterdir()) == ["manifest.json", "runs", "worlds"]


@pytest.mark.parametrize(("n", "fmt", "error"), [(0, "native", CorpusError), (True, "native", CorpusError), (5, "tau-bench", UnknownName)])
def test_bad_n_or_format_says_so_before_writing(tmp_path, n, fmt, error):
    with pytest.raises(error):
        write_corpus(n, 1, fmt, tmp_path / "corpus")
    assert not (tmp_path / "corpus").exists()


# -- the adapter mapping the corpus relies on ---------------------------------------------------------


def _chat_body(metadata):
    return {"model": "gpt-4o", "metadata": metadata, "messages": [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_profile", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{}"},
    ]}


def test_chat_request_metadata_carries_task_principal_session_and_verdict(tmp_path):
    path = tmp_path / "run-7.json"
    path.write_text(json.dumps(_chat_body({"task": "portal", "principal": "kim", "ambient_session": "tok-1", "verdict": "safe", "other": "x"})))
    (run,) = load_trajectories(path)
    assert (run.id, run.task, run.principal, run.ambient_session, run.original_verdict.label) == ("run-7", "portal", "kim", "tok-1", "safe")


def test_chat_request_metadata_that_is_not_a_non_empty_string_is_ignored(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(_chat_body({"task": "", "principal": 3, "verdict": "  "})))
    (run,) = load_trajectories(path)
    assert (run.task, run.principal, run.ambient_session, run.original_verdict) == (None, DEFAULT_PRINCIPAL, None, None)


def _inspect_log(tmp_path: Path, metadata) -> Path:
    sample = {"id": "s1", "epoch": 1, "metadata": metadata, "scores": {"judge": {"value": "tool_misuse"}}, "messages": [
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": "get_profile", "arguments": {}}]},
        {"role": "tool", "content": "{}", "tool_call_id": "c1"},
    ]}
    path = tmp_path / "log.json"
    path.write_text(json.dumps({"version": 2, "eval": {"task": "suite/eval-task", "run_id": "r1"}, "samples": [sample]}))
    return path


def test_inspect_sample_metadata_overrides_the_eval_task_and_names_principal_and_session(tmp_path):
    (run,) = load_trajectories(_inspect_log(tmp_path, {"task": "portal", "principal": "kim", "ambient_session": "tok-1"}))
    assert (run.id, run.task, run.principal, run.ambient_session, run.original_verdict.label) == (
        "s1_epoch_1", "portal", "kim", "tok-1", "tool_misuse")


def test_inspect_sample_without_usable_metadata_keeps_the_eval_task_and_default_principal(tmp_path):
    (run,) = load_trajectories(_inspect_log(tmp_path, {"task": None, "principal": ""}))
    assert (run.task, run.principal, run.ambient_session) == ("suite/eval-task", DEFAULT_PRINCIPAL, None)


def test_a_corpus_run_replays_the_same_from_every_format(tmp_path):
    """The adapters lose nothing a replay depends on: the same run gives the same pair classes in all formats."""
    classes = {}
    for fmt in FORMATS:
        out = tmp_path / fmt
        generate_corpus(12, 3, fmt, out)
        worlds = load_worlds(out / "worlds")
        classes[fmt] = {
            t.id.removesuffix("_epoch_1"): [c.pair.cls.value for c in Replayer(worlds[t.task].policy).replay(t, worlds[t.task].world).calls]
            for t in read_back(out)
        }
    assert classes["native"] == classes["openai-chat"] == classes["inspect"]
