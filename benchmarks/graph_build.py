"""Causal graph build and detection time for synthetic trajectories of 100, 1,000 and 10,000 calls.

Each synthetic trajectory is replayed once (not timed), then the graph is built and every detector run,
best of several rounds. The calls chain through data (arguments carrying earlier outputs) and state
(records and files written and read again), as real agent runs do.

Goal: 10,000 calls under 1 s, and 10x the calls costing at most 12x the time.

Run: python benchmarks/graph_build.py [--sizes 100 1000 10000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import platform
import time

from litmus_replay.replay.detectors import run_detectors
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.graph import build_graph
from litmus_replay.replay.model import Trajectory
from litmus_replay.replay.policy import Policy, PolicySpec, RuleSpec

FILES = 40
ROWS = 100
WORLD = {
    "principals": ["alice", "bob"],
    "facts": {"workspace": "/workspace"},
    "files": {"tree": {f"/workspace/notes/f{i}.txt": f"ticket T{i:05d} owner alice\n" for i in range(FILES)}},
    "records": {"rows": [{"id": i, "owner": "alice" if i % 3 else "bob", "data": {"name": f"cust{i:04d}"}}
                         for i in range(1, ROWS + 1)]},
    "bank": {"accounts": {"acc-alice": {"owner": "alice", "balance": 10**9}, "acc-bob": {"owner": "bob", "balance": 0}}},
}
POLICY = PolicySpec(rules=[
    RuleSpec(id="write-outside", when="tool == 'write_file' && !resolved.path.startsWith(world.workspace + '/')",
             critical=True),
    RuleSpec(id="big-transfer", when="tool == 'transfer_funds' && params.amount >= 1000", critical=True),
    RuleSpec(id="foreign-update", when="tool == 'update_record' && principal != declared_principal"),
])


def synthetic(n: int) -> Trajectory:
    """n calls in turns of four: read a note, query records, update one, write a summary / transfer."""
    turns = []
    for i in range(0, n, 4):
        f, row = i % FILES, i % ROWS + 1
        calls = [
            {"tool": "read_file", "arguments": {"path": f"/workspace/notes/f{f}.txt"}},
            {"tool": "query_records", "arguments": {"filter": f"name=cust{row:04d}"}},
            {"tool": "update_record", "arguments": {"id": row, "fields": {"note": f"T{f:05d}"}}},
            {"tool": "write_file", "arguments": {"path": f"/workspace/out/s{i % 50}.txt", "content": f"cust{row:04d} T{f:05d}"}}
            if (i // 4) % 5 else
            {"tool": "transfer_funds", "arguments": {"from": "acc-alice", "to": "acc-bob", "amount": 10 + i % 2000}},
        ]
        turns.append({"text": "working", "calls": calls[: n - i]})
    return Trajectory.model_validate({"id": f"synthetic-{n}", "principal": "alice", "turns": turns})


def measure(n: int, rounds: int) -> tuple[float, int]:
    replayer = Replayer(Policy.compile(POLICY))
    result = replayer.replay(synthetic(n), WORLD, f"synthetic-{n}")
    best, edges = float("inf"), 0
    for _ in range(rounds):
        start = time.perf_counter()
        graph = build_graph(result)
        run_detectors(graph, result)
        best = min(best, time.perf_counter() - start)
        edges = graph.number_of_edges()
    return best, edges


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 10000])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"# graph_build.py --sizes {' '.join(map(str, args.sizes))} --rounds {args.rounds}")
    print(f"# python {platform.python_version()} on {platform.machine()}; best of {args.rounds}; replay not timed")
    print(f"{'calls':>8}{'edges':>10}{'build+detect s':>16}  {'vs previous':<16}")
    previous = None
    for n in args.sizes:
        seconds, edges = measure(n, args.rounds)
        ratio = f"{seconds / previous[1]:.1f}x for {n / previous[0]:.0f}x" if previous else ""
        print(f"{n:>8}{edges:>10}{seconds:>16.3f}  {ratio:<16}")
        previous = (n, seconds)


if __name__ == "__main__":
    main()
