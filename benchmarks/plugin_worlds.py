"""What a plug-in domain costs in each runtime: a world of the example plug-in (examples/tickets, installed
with ``pip install ./examples/tickets``) opened, called and closed, and one call's round trip.

    python benchmarks/plugin_worlds.py [--worlds 20] [--calls 200]

* world: open (its code mounted read-only in an isolated runtime, the plug-in module imported by the env
  server), one ``close_ticket``, close; median of ``--worlds``, after one to warm up. A sandbox or container
  whose world touched only contained domains is reused, so this is the steady state of a batch.
* call: one ``list_tickets`` in an open world, median of ``--calls``.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

from litmus_replay.envs.domain import domain_names
from litmus_replay.envs.errors import RuntimeUnavailable
from litmus_replay.envs.runtime import get_runtime

WORLD = {"principals": ["alice", "bob"],
         "tickets": {"teams": {"alice": "platform", "bob": "payments"},
                     "tickets": {"T-1": {"team": "platform"}, "T-2": {"team": "payments"}}}}
CLOSE = {"tool": "close_ticket", "params": {"id": "T-2"}, "principal": "alice"}
LIST = {"tool": "list_tickets", "params": {}, "principal": "alice"}


def _world_once(runtime) -> float:
    start = time.perf_counter()
    with runtime.open_world(WORLD, "real") as world:
        world.call(CLOSE)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=20)
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    if "tickets" not in domain_names():
        sys.exit("the example plug-in is not installed: pip install ./examples/tickets")
    print(f"# plugin_worlds.py --worlds {args.worlds} --calls {args.calls}")
    print(f"# python {platform.python_version()}, {platform.machine()}")
    print(f"{'runtime':<12}{'world (ms)':>12}{'call (ms)':>12}")
    for name in ("inprocess", "sandbox", "docker"):
        try:
            runtime = get_runtime(name)
        except RuntimeUnavailable as exc:
            print(f"{name:<12}unavailable: {exc}")
            continue
        with runtime:
            _world_once(runtime)
            worlds = [_world_once(runtime) for _ in range(args.worlds)]
            with runtime.open_world(WORLD, "real") as world:
                calls = []
                for _ in range(args.calls):
                    start = time.perf_counter()
                    world.call(LIST)
                    calls.append(time.perf_counter() - start)
        print(f"{name:<12}{1000 * statistics.median(worlds):>12.1f}{1000 * statistics.median(calls):>12.2f}")


if __name__ == "__main__":
    main()
