"""Re-validating AgentDojo runs: runs per second through ``revalidate`` with two worker processes, and the
per-run floor (a fresh environment with the run's injections, its calls, AgentDojo's checks) beside it.

    python benchmarks/agentdojo_revalidate.py [--copies 12] [--jobs 2]

The shipped 160 runs (tests/fixtures/external/agentdojo-runs/) are laid out ``--copies`` times under
distinct paths, so the batch is large enough for the workers' start (importing agentdojo, parsing each
suite's YAML once) to be paid once, as on the 36,679 published runs. The real world runs in process
(AgentDojo's environment lives in memory). Goal: at least 200 runs/s on 2 cores, so that all published
runs take under 4 minutes.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import tempfile
import time
import warnings
from pathlib import Path

from litmus_replay.adapters import load_trajectories
from litmus_replay.envs import World
from litmus_replay.replay import batch
from litmus_replay.replay.bridges.agentdojo import AgentDojoWorlds

RUNS = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "external" / "agentdojo-runs"
PUBLISHED_RUNS = 36_679


def per_run_floor(repeats: int) -> tuple[float, float, float, int]:
    """Milliseconds per run for the environment, the calls and the checks, best of ``repeats`` passes."""
    provider = AgentDojoWorlds()
    runs = []
    for path in sorted(RUNS.rglob("*.json")):
        (trajectory,) = load_trajectories(path, "agentdojo")
        if trajectory.call_count():
            world = provider.world_for(trajectory)
            requests = [{"tool": call.tool, "params": call.arguments, "principal": "agent"} for _, call in trajectory.calls()]
            runs.append((world.world, requests))
    best = [float("inf")] * 3
    for _ in range(repeats):
        spent = [0.0, 0.0, 0.0]
        for spec, requests in runs:
            started = time.perf_counter()
            world = World(spec, "real")
            built = time.perf_counter()
            for request in requests:
                world.call(request)
            called = time.perf_counter()
            world.report()
            checked = time.perf_counter()
            world.close()
            spent[0] += built - started
            spent[1] += called - built
            spent[2] += checked - called
        best = [min(b, s * 1000 / len(runs)) for b, s in zip(best, spent)]
    return best[0], best[1], best[2], len(runs)


def lay_out(target: Path, copies: int) -> int:
    for copy in range(copies):
        shutil.copytree(RUNS, target / f"copy-{copy:03d}", ignore=shutil.ignore_patterns("*.txt"))
    return sum(1 for _ in target.rglob("*.json"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", type=int, default=12)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    print(f"# agentdojo_revalidate.py --copies {args.copies} --jobs {args.jobs}")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"# python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs (load average {load}); "
          "runtime inprocess, no HTML reports")
    environment, calls, checks, replayed = per_run_floor(args.repeats)
    floor = environment + calls + checks
    print(f"per-run floor ({replayed} runs with calls, one core): {floor:.2f} ms = environment {environment:.2f} ms "
          f"+ calls {calls:.2f} ms + checks {checks:.2f} ms -> at most {1000 / floor * args.jobs:.0f} runs/s on {args.jobs} cores")
    with tempfile.TemporaryDirectory() as tmp:
        total = lay_out(Path(tmp) / "runs", args.copies)
        started = time.perf_counter()
        summary = batch.run_batch([Path(tmp) / "runs"], None, Path(tmp) / "out", fmt="agentdojo", runtime="inprocess",
                                  jobs=args.jobs, reports=False)
        seconds = time.perf_counter() - started
    rate = total / seconds
    agreement = summary.get("checks", {}).get("agreement", {})
    print(f"revalidate, {args.jobs} jobs: {total} runs in {seconds:.2f} s = {rate:.0f} runs/s "
          f"(worker start included); the {PUBLISHED_RUNS:,} published runs: {PUBLISHED_RUNS / rate / 60:.1f} min")
    print("agreement: " + ", ".join(f"{name} {rate_['agree']}/{rate_['runs']}" for name, rate_ in agreement.items()))


if __name__ == "__main__":
    main()
