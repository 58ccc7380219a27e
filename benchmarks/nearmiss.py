"""Near-miss mutants tried and kept per second: ``litmus-replay nearmiss`` over the built-in packs (core,
detectors, bindings) with the real world in-process, and over the shell pack with it in the sandbox.

A mutant *tried* is one distinct set of edits replayed into both worlds and analysed (graph, detectors);
*kept* is one written as a scenario after shrinking and dedupe. Time covers the whole command's work —
the seeds' own replays, the search, shrinking, boundary probes and writing the files — but not loading the
scenarios. The sandbox runtime is started, and one seed searched, before timing.

Run: python benchmarks/nearmiss.py [--tries 30] [--count 8] [--seed 0] [--no-sandbox]
"""

from __future__ import annotations

import argparse
import os
import platform
import tempfile
import time
from pathlib import Path

from litmus_replay.envs.runtime import Runtime, get_runtime
from litmus_replay.replay.nearmiss import generate, seeds_from_scenario
from litmus_replay.replay.scenario import find_scenarios

ROOT = Path(__file__).resolve().parents[1]


def rate(packs: list[str], runtime: Runtime, tries: int, count: int, seed: int) -> tuple[int, int, int, float]:
    seeds = [s for path in find_scenarios([ROOT / "scenarios" / p for p in packs]) for s in seeds_from_scenario(path)]
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        results, _ = generate(seeds, Path(out), count, tries, seed, runtime)
        seconds = time.perf_counter() - start
    return len(seeds), sum(r.tried for r in results), sum(len(r.mutants) for r in results), seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=30)
    parser.add_argument("--count", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-sandbox", action="store_true", help="skip the shell pack (it needs the sandbox)")
    args = parser.parse_args(argv)
    print(f"# nearmiss.py --tries {args.tries} --count {args.count} --seed {args.seed}")
    print(f"# python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    runs = [("core+detectors+bindings", ["core", "detectors", "bindings"], "inprocess")]
    if not args.no_sandbox:
        runs.append(("shell", ["shell"], "sandbox"))
    for label, packs, runtime_name in runs:
        with get_runtime(runtime_name) as runtime:
            if runtime_name == "sandbox":
                rate(packs[:1], runtime, 1, 1, args.seed)  # start the sandbox machinery once
            seeds, tried, kept, seconds = rate(packs, runtime, args.tries, args.count, args.seed)
        print(f"{label} ({runtime_name}): {seeds} seeds, {tried} tried, {kept} kept in {seconds:.1f} s = "
              f"{tried / seconds:.1f} tried/s, {kept / seconds:.2f} kept/s")


if __name__ == "__main__":
    main()
