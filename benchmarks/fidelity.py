"""Fidelity examples per second: call sequences the lab drives into a stub twin and a real twin, with the
real twin in-process and in the sandbox, side by side in one run.

An example is one hypothesis-drawn sequence (a fresh world pair, then up to ``--steps`` calls into both,
each compared): the counting pass of ``litmus-replay fidelity``, without the search. The stub always runs
in-process. The sandbox runtime is constructed, and one example run, before timing.

Run: python benchmarks/fidelity.py [--domain bank] [--examples 200] [--sandbox-examples 40] [--steps 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from litmus_replay.envs.runtime import Runtime, get_runtime
from litmus_replay.replay.fidelity.lab import _run, _seed
from litmus_replay.replay.fidelity.machine import Tally, machine_for
from litmus_replay.replay.fidelity.registry import get_space


def examples_per_second(domain: str, stub: Runtime, real: Runtime, examples: int, steps: int) -> tuple[Tally, float]:
    space = get_space(domain)
    tally = Tally()
    start = time.perf_counter()
    _run(machine_for(space.world_strategy(), space.calls, stub, real, tally), examples, _seed(0, domain, -1), steps)
    return tally, time.perf_counter() - start


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", default="bank")
    parser.add_argument("--examples", type=int, default=200, help="examples with the in-process real twin")
    parser.add_argument("--sandbox-examples", type=int, default=40, help="examples with the real twin in the sandbox")
    parser.add_argument("--steps", type=int, default=5)
    args = parser.parse_args(argv)
    stub = get_runtime("inprocess")
    print(f"# fidelity.py --domain {args.domain} --examples {args.examples} --sandbox-examples "
          f"{args.sandbox_examples} --steps {args.steps}")
    print(f"# python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores, "
          f"load average {os.getloadavg()[0]:.1f}")
    with get_runtime("sandbox") as sandbox:
        examples_per_second(args.domain, stub, sandbox, 1, 1)  # start the sandbox machinery once
        for name, real, examples in (("inprocess", stub, args.examples), ("sandbox", sandbox, args.sandbox_examples)):
            tally, seconds = examples_per_second(args.domain, stub, real, examples, args.steps)
            print(f"{name:>9}: {tally.examples} examples, {tally.compared + tally.after_divergence} calls in "
                  f"{seconds:.1f} s = {tally.examples / seconds:.1f} examples/s")


if __name__ == "__main__":
    main()
