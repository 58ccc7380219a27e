"""Trajectories per second under the docker runtime: a warm container pool against a fresh container per
trajectory, side by side in one run.

Each trajectory of scenarios/core is replayed as the engine does (stub world in-process, real world in a
container, every call judged twice and scored). ``pool``: containers are kept after a world closes and
the next world is a ``load`` into one (pool_size=2). ``fresh``: pool_size=0, so every trajectory starts a
container, waits for its env server, and removes the container when the world closes. Both runtimes are
constructed, and the pool warmed with one trajectory, before timing; the image must exist
(``litmus-replay image build --offline``). Goal: the pool at least 20x faster.

Run: python benchmarks/docker_pool.py [--pool-rounds 20] [--fresh-rounds 2]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path

from litmus_replay.envs.runtime import Runtime, get_runtime
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.scenario import Scenario, find_scenarios, load_scenario

PACK = Path(__file__).resolve().parent.parent / "scenarios" / "core"


def replay_rounds(runtime: Runtime, scenarios: list[Scenario], rounds: int) -> tuple[int, float]:
    """Replay the pack ``rounds`` times; (trajectories, seconds)."""
    count = 0
    start = time.perf_counter()
    for _ in range(rounds):
        for scenario in scenarios:
            replayer = Replayer(scenario.policy, real_runtime=runtime)
            for trajectory in scenario.trajectories:
                replayer.replay(trajectory, scenario.spec.world, scenario.name)
                count += 1
    return count, time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pool-rounds", type=int, default=20, help="pack rounds with the warm pool")
    parser.add_argument("--fresh-rounds", type=int, default=2, help="pack rounds with a fresh container each")
    args = parser.parse_args(argv)
    scenarios = [load_scenario(path) for path in find_scenarios([PACK])]

    with get_runtime("docker", pool_size=2) as pool, get_runtime("docker", pool_size=0) as fresh:
        replay_rounds(pool, scenarios[:1], 1)  # fill the pool: what a long batch runs with
        pooled, pool_s = replay_rounds(pool, scenarios, args.pool_rounds)
        started, fresh_s = replay_rounds(fresh, scenarios, args.fresh_rounds)
        engine, image, limits = pool.engine.server_version(), pool.image, pool.limits  # type: ignore[attr-defined]

    pool_rate, fresh_rate = pooled / pool_s, started / fresh_s
    print(f"# docker_pool.py --pool-rounds {args.pool_rounds} --fresh-rounds {args.fresh_rounds}")
    print(f"# python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; "
          f"Docker engine {engine}; image {image}")
    print(f"# {len(scenarios)} scenarios; real world in docker, stub world in-process; per container: "
          f"{limits['cpus']} CPU, {limits['memory']} memory, {limits['pids']} pids, no network")
    print(f"{'mode':<28}{'trajectories':>13}{'seconds':>10}{'traj/s':>10}")
    print(f"{'warm pool (pool_size=2)':<28}{pooled:>13}{pool_s:>10.2f}{pool_rate:>10.1f}")
    print(f"{'fresh container per world':<28}{started:>13}{fresh_s:>10.2f}{fresh_rate:>10.2f}")
    ratio = pool_rate / fresh_rate
    print(f"pool / fresh: {ratio:.0f}x (goal: at least 20x){'' if ratio >= 20 else '  -- BELOW GOAL'}")
    sys.exit(0 if ratio >= 20 else 1)


if __name__ == "__main__":
    main()
