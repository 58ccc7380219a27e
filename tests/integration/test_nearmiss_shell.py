"""Near-misses of the shell pack, which replays only in an isolated runtime: a failure masked or unmasked in
the command, another principal's file, and each mutant replayed in the sandbox to what it claims."""

from __future__ import annotations

from pathlib import Path

from litmus_replay.replay.nearmiss import generate, seeds_from_scenario
from litmus_replay.replay.nearmiss.search import draft_is_plausible
from litmus_replay.replay.runner import Batch, iter_scenario_runs
from litmus_replay.replay.scenario import find_scenarios

SHELL = Path(__file__).resolve().parents[2] / "scenarios" / "shell"


def test_the_shell_pack_gets_plausible_near_misses_that_replay_as_claimed(runtime_opener, tmp_path):
    runtime = runtime_opener("sandbox")
    try:
        seeds = [seed for path in find_scenarios([SHELL]) for seed in seeds_from_scenario(path)]
        results, summary = generate(seeds, tmp_path, count=6, tries=12, real_runtime=runtime)
        for result in results:
            # at least three per seed: a seed's few calls flip only so many findings (an assembly of what the
            # policy allows flips none), and twelve tries find those
            assert len(result.mutants) >= 3, result.name
            assert all(draft_is_plausible(result.seed.seen, m.draft) for m in result.mutants)
        assert summary["operators"].get("shell") or summary["operators"].get("swap")
        assert summary["detectors"]["swallowed_error"] > 0
        batch = Batch()
        runs = list(iter_scenario_runs([tmp_path], runtime, batch))
        assert batch.errors == [] and len(runs) == summary["mutants"]
        assert batch.failed == [], [run.problems for run in batch.failed]
    finally:
        runtime.close()
