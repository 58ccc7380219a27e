"""Replay throughput of the built-in pack, and the cost of going through a world's call interface.

Prints:
  * calls per second replaying scenarios/core many times (each call: into a stub world and a real world,
    judged twice by the policy, scored as a pair);
  * per tool, the cost of an in-process real call through ``World.call`` (binding, snapshot diff, outcome
    dict, as the engine does) against a direct call of the same domain function, as a ratio measured in
    the same process.

Run: python benchmarks/replay_pack.py [--repeat 30] [--calls 2000]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

from litmus_replay.envs import Outcome, World
from litmus_replay.envs.domain import Call
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.scenario import find_scenarios, load_scenario

PACK = Path(__file__).resolve().parent.parent / "scenarios" / "core"

WORLD = {
    "principals": ["alice", "bob"],
    "sessions": {"tok-a": "alice"},
    "session": "tok-a",
    "files": {"tree": {f"/workspace/f{i}.txt": f"line {i}\n" for i in range(20)}},
    "records": {"rows": [{"id": i, "owner": "alice" if i % 2 else "bob", "data": {"n": i}} for i in range(1, 51)]},
    "bank": {"accounts": {"acc-alice": {"owner": "alice", "balance": 100}, "acc-bob": {"owner": "bob", "balance": 1}}},
    "profiles": {"alice": {"email": "a@example.com"}, "bob": {"email": "b@example.com"}},
}
TOOLS = [
    ("files", "read_file", {"path": "/workspace/f3.txt"}),
    ("records", "query_records", {"filter": "owner=alice"}),
    ("bank", "get_balance", {"account": "acc-alice"}),
    ("profiles", "get_profile", {}),
    ("profiles", "update_profile", {"field": "email", "value": "same@example.com"}),
]


def pack_throughput(repeat: int) -> tuple[int, float]:
    scenarios = [load_scenario(path) for path in find_scenarios([PACK])]
    calls = 0
    start = time.perf_counter()
    for _ in range(repeat):
        for scenario in scenarios:
            replayer = Replayer(scenario.policy)
            for trajectory in scenario.trajectories:
                calls += len(replayer.replay(trajectory, scenario.spec.world, scenario.name).calls)
    return calls, time.perf_counter() - start


def _best_per_call(func, n: int, rounds: int = 5) -> float:
    timings = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            func()
        timings.append((time.perf_counter() - start) / n)
    return min(timings)


def call_overhead(n: int) -> list[tuple[str, float, float]]:
    rows = []
    with World(WORLD, "real") as world:
        for domain_name, tool, params in TOOLS:
            request = {"tool": tool, "params": params, "principal": "alice", "session": "tok-a"}
            domain = world._domain(domain_name)
            method = domain.tools[tool]

            def direct() -> None:
                method(domain, Call(tool=tool, params=params, principal="alice", session="tok-a"), **params)

            def through_world() -> None:
                Outcome.from_dict(world.call(request))

            rows.append((tool, _best_per_call(direct, n), _best_per_call(through_world, n)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=30, help="times to replay the whole pack")
    parser.add_argument("--calls", type=int, default=2000, help="calls per timing round for the overhead ratio")
    args = parser.parse_args()
    print(f"# {Path(sys.argv[0]).name} --repeat {args.repeat} --calls {args.calls}")
    print(f"# python {platform.python_version()} on {platform.machine()}, best of 5 rounds for ratios")
    calls, seconds = pack_throughput(args.repeat)
    print(f"pack replay (inprocess stub + inprocess real): {calls} calls in {seconds:.2f} s = {calls / seconds:,.0f} calls/s")
    rows = call_overhead(args.calls)
    print(f"{'tool':<16}{'direct µs':>12}{'World.call µs':>16}{'ratio':>8}")
    for tool, direct, world in rows:
        print(f"{tool:<16}{direct * 1e6:>12.1f}{world * 1e6:>16.1f}{world / direct:>8.1f}x")
    print(f"median ratio: {statistics.median(w / d for _, d, w in rows):.1f}x")


if __name__ == "__main__":
    main()
