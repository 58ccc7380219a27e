"""Re-validating τ²-bench simulations: simulations per second through ``revalidate`` with two worker
processes, and the per-simulation floor (a copy of the task's environment, the recorded calls through τ²'s
tools, τ²'s own evaluation; no analysis) measured in the same run, and their ratio.

    python benchmarks/tau2_revalidate.py [--runs DIR] [--jobs 2]

The runs are the 280 real simulations kept beside the checkout (``../shared/fixtures/external/
tau2-bench-runs/``: airline, retail, telecom with a user simulator, telecom solo), or ``--runs``. The real
world runs in process (τ²'s environment lives in memory). Goal: at least 100 simulations/s on 2 cores.
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
import warnings
from pathlib import Path

from litmus_replay.adapters import load_trajectories
from litmus_replay.envs import World
from litmus_replay.replay import batch
from litmus_replay.replay.bridges.tau2 import Tau2Worlds

RUNS = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "external" / "tau2-bench-runs"
GOAL = 100


def per_run_floor(runs: Path, repeats: int) -> tuple[float, float, float, int]:
    """Milliseconds per simulation for the environment, the calls and τ²'s evaluation, best of ``repeats``
    passes (the first pass builds each task's template, as a worker does once)."""
    provider = Tau2Worlds()
    worlds = []
    for path in sorted(runs.glob("*.json")):
        for trajectory in load_trajectories(path, "tau2-bench"):
            world = provider.world_for(trajectory)
            requests = [{"tool": call.tool, "params": call.arguments, "principal": call.principal or "agent"}
                        for _, call in trajectory.calls()]
            worlds.append((world.world, requests))
    best = [float("inf")] * 3
    for _ in range(repeats):
        spent = [0.0, 0.0, 0.0]
        for spec, requests in worlds:
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
        best = [min(b, s * 1000 / len(worlds)) for b, s in zip(best, spent)]
    return best[0], best[1], best[2], len(worlds)


def _cpu() -> tuple[float, float]:
    """CPU seconds of this process and of its ended children (the pool's workers)."""
    import resource

    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=RUNS)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not args.runs.is_dir():
        parser.error(f"--runs: no directory {args.runs}")
    warnings.filterwarnings("ignore")
    print(f"# tau2_revalidate.py --jobs {args.jobs}")
    load = ", ".join(f"{value:.1f}" for value in os.getloadavg())
    print(f"# python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs (load average {load}); "
          "runtime inprocess, no HTML reports")
    with tempfile.TemporaryDirectory() as tmp:
        started, cpu = time.perf_counter(), _cpu()
        summary = batch.run_batch([args.runs], None, Path(tmp) / "out", fmt="tau2-bench", runtime="inprocess",
                                  jobs=args.jobs, reports=False)
        seconds = time.perf_counter() - started
        own, workers = (after - before for after, before in zip(_cpu(), cpu))
    total = summary.get("runs", {}).get("total") if isinstance(summary.get("runs"), dict) else None
    total = total or sum(len(load_trajectories(path, "tau2-bench")) for path in sorted(args.runs.glob("*.json")))
    rate = total / seconds
    environment, calls, checks, replayed = per_run_floor(args.runs, args.repeats)
    floor = environment + calls + checks
    floor_rate = 1000 / floor * args.jobs
    print(f"per-simulation floor ({replayed} simulations, one core): {floor:.2f} ms = environment {environment:.2f} ms "
          f"+ calls {calls:.2f} ms + evaluation {checks:.2f} ms -> at most {floor_rate:.0f} simulations/s on {args.jobs} cores")
    print(f"revalidate, {args.jobs} jobs: {total} simulations in {seconds:.2f} s = {rate:.0f} simulations/s "
          f"(worker start included; goal {GOAL}); {rate / floor_rate:.2f} of the floor")
    # Other work on the machine takes cores from the batch: its CPU says what free cores would give.
    busiest = max(workers / args.jobs, own)
    print(f"CPU: workers {workers:.2f} s ({workers / total * 1000:.1f} ms per simulation, worker start included), "
          f"this process {own:.2f} s -> about {total / busiest:.0f} simulations/s on {args.jobs} free cores")
    agreement = summary.get("checks", {}).get("agreement", {})
    print("agreement: " + ", ".join(f"{name} {rate_['agree']}/{rate_['runs']}" for name, rate_ in agreement.items()))


if __name__ == "__main__":
    main()
