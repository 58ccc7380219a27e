"""The near-miss generator over the built-in packs (core, detectors, bindings; the shell pack needs an
isolated runtime and is under tests/integration), the example plug-in domain and an AgentDojo run: at least
five distinct mutants per scenario, every one replayed to the classes and findings it claims, every pair
class and every detector reached across the pack. The pack is generated once per module."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from litmus_replay.envs.runtime import get_runtime
from litmus_replay.replay.cli import main
from litmus_replay.replay.detectors import DETECTORS
from litmus_replay.replay.nearmiss import generate, seeds_from_scenario
from litmus_replay.replay.nearmiss.search import draft_is_plausible
from litmus_replay.replay.runner import Batch, iter_scenario_runs
from litmus_replay.replay.scenario import find_scenarios
from litmus_replay.replay.scoring import PairClass

pytestmark = pytest.mark.slow  # searches every built-in scenario's near misses: tens of seconds

ROOT = Path(__file__).resolve().parents[2]
PACKS = [ROOT / "scenarios" / name for name in ("core", "detectors", "bindings")]
TRIES = 30  # enough for five distinct mutants on every built-in scenario, and modest on two cores


def replay_all(out: Path) -> Batch:
    batch = Batch()
    list(iter_scenario_runs([out], get_runtime("inprocess"), batch))
    assert batch.errors == []
    return batch


@pytest.fixture(scope="module")
def pack(tmp_path_factory):
    out = tmp_path_factory.mktemp("nearmiss-pack")
    seeds = [seed for path in find_scenarios(PACKS) for seed in seeds_from_scenario(path)]
    results, summary = generate(seeds, out, count=8, tries=TRIES, seed=0)
    return out, results, summary


def test_every_built_in_scenario_gets_at_least_five_distinct_mutants(pack):
    _, results, _ = pack
    assert len(results) == len(find_scenarios(PACKS))
    for result in results:
        assert len(result.mutants) >= 5, result.name
        assert len({m.dedupe_key for m in result.mutants}) == len(result.mutants), result.name
        bodies = [path.read_text(encoding="utf-8") for path in result.files]
        documents = [yaml.safe_load(body) for body in bodies]
        changes = {repr(({**doc["trajectory"], "id": None}, doc["world"])) for doc in documents}
        assert len(changes) == len(documents), f"{result.name}: two mutants are the same run"


def test_every_mutant_replays_to_the_classes_and_findings_it_claims(pack):
    out, results, _ = pack
    batch = replay_all(out)
    assert len(batch.runs) == sum(len(r.mutants) for r in results)
    assert batch.failed == [], [run.problems for run in batch.failed]
    for run in batch.runs:
        document = yaml.safe_load(Path(run.source).read_text(encoding="utf-8"))
        assert set(document["expect"]["findings"]) == set(DETECTORS)  # every detector is held to its count
        assert "\n" not in document["description"].strip()


def test_the_pack_reaches_every_pair_class_and_fires_every_detector(pack):
    _, _, summary = pack
    assert all(summary["flipped_to"][cls.value] > 0 for cls in PairClass), summary["flipped_to"]
    assert all(summary["detectors"][kind] > 0 for kind in DETECTORS), summary["detectors"]


def test_kept_mutants_are_minimal_and_plausible(pack):
    _, results, _ = pack
    for result in results:
        for mutant in result.mutants:
            assert draft_is_plausible(result.seed.seen, mutant.draft)
            if not mutant.on_boundary and len(mutant.edits) > 1:
                search = result.search
                for index in range(len(mutant.edits)):
                    fewer = search.evaluate(mutant.edits[:index] + mutant.edits[index + 1:])
                    assert fewer is None or fewer.flips != mutant.flips, (result.name, mutant.edits)


def test_a_boundary_mutant_is_one_edit_from_its_flip(pack):
    _, results, _ = pack
    boundary = [(r, m) for r in results for m in r.mutants if m.on_boundary]
    assert boundary
    for result, mutant in boundary:
        assert mutant.flips == ()
        further = result.search.evaluate(mutant.edits + (mutant.one_more,))
        assert further is not None and further.verdict != mutant.verdict
        alone = result.search.evaluate((mutant.one_more,))
        assert alone is not None and alone.flips == ()  # the mutant's own change is what put it on the edge


def test_the_example_plugin_domain_gets_near_misses(tickets_plugin, tmp_path):
    seeds = seeds_from_scenario(tickets_plugin / "scenario.yaml")
    results, summary = generate(seeds, tmp_path, count=8, tries=TRIES)
    assert len(results[0].mutants) >= 5
    batch = replay_all(tmp_path)
    assert len(batch.runs) == len(results[0].mutants) and batch.failed == []
    assert summary["flipped_to"]["confirmed_misuse"] or summary["flipped_to"]["confirmed_safe"]


def test_an_agentdojo_run_gets_near_misses_through_the_command(tmp_path):
    pytest.importorskip("agentdojo")
    # The benchmark's policy flags only the injection's goal, which this run never reached: few single changes
    # flip it, so the bar here is near-misses that replay as claimed, not five of them.
    run = (ROOT / "tests" / "fixtures" / "external" / "agentdojo-runs" / "command-r" / "slack"
           / "user_task_20" / "important_instructions" / "injection_task_1.json")
    result = CliRunner().invoke(main, ["nearmiss", str(run), "--format", "agentdojo", "--tries", "20", "--count", "6",
                                       "--out", str(tmp_path), "--runtime", "inprocess"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "summary.json").read_text(encoding="utf-8"))
    (seed,) = summary["seeds"]
    assert seed["kept"] >= 2 and seed["source"].startswith("agentdojo")
    batch = replay_all(tmp_path)
    assert len(batch.runs) == seed["kept"] and batch.failed == []
