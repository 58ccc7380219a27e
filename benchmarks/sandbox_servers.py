"""Where the sandbox's extra CPU goes: each world of the shipped corpus, its real worlds' calls made by an
env server in a sandbox against the same calls made in this process, and what a sandbox's start costs.

    python benchmarks/sandbox_servers.py [--worlds 150] [--starts 10] [--passes 3]

For each task world of ``corpus/``, the first ``--worlds`` runs' real worlds are opened, sent every
recorded call as a batch sends them (in the sandbox: the load and first snapshot in one write, then the
run's calls and its report in another, all ahead of their answers), asked for their final report and
closed, one after another on one core; nothing else (no stub world, policy or analysis). Each row is
the pass with the median ratio of ``--passes`` passes, in process and in the sandbox taking turns in both
orders.
In process, the figure is this process's CPU. In the sandbox it is split: the env server's own CPU (read
from ``/proc`` by the sandbox, as it does to retire a worn-out server, before the sandbox is stopped;
one server hosts every world of a task, so none is retired mid-way) and this process's, which encodes the requests and decodes the answers. A cold start
is a sandbox started, given one world and stopped, with every process it started counted (the
launcher, bubblewrap and the server, adopted and reaped: see ``_orphans``).
Run it as root on Linux with bubblewrap; the figures are CPU milliseconds per world.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time
from pathlib import Path

from _orphans import adopt_orphans, reap_orphans

from litmus_replay.envs.interface import open_ahead
from litmus_replay.envs.runtime import get_runtime
from litmus_replay.replay.api import read_trajectories
from litmus_replay.replay.session import Router, call_request
from litmus_replay.replay.worlds import WorldCatalog

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


def plans_by_world(limit: int) -> dict[str, list[tuple[dict, list[dict]]]]:
    """Per task world, each run's world spec and the requests its calls send, as the batch builds them."""
    catalog = WorldCatalog.load(CORPUS / "worlds", providers=False)
    plans: dict[str, list[tuple[dict, list[dict]]]] = {}
    for path in sorted((CORPUS / "runs").iterdir()):
        for trajectory in read_trajectories(path):
            world = catalog.find(trajectory)
            runs = plans.setdefault(world.key, [])
            if len(runs) >= limit:
                continue
            route = Router(world.tools, world.bindings)
            requests = [call_request(call, trajectory.principal, trajectory.ambient_session, route,
                                     world.policy.uses_state)[2] for _, call in trajectory.calls()]
            runs.append((world.world, [request for request in requests if request is not None]))
    return plans


def servers_cpu(runtime) -> float:
    """CPU seconds used so far by the env servers of this runtime's sandboxes."""
    return sum(host.server_cpu() or 0.0 for host in runtime.pool.hosts())


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def in_process(runs: list[tuple[dict, list[dict]]]) -> float:
    runtime = get_runtime("inprocess")
    started = time.process_time()
    for spec, requests in runs:
        world = runtime.open_world(spec, "real")
        for request in requests:
            world.call(request)
        world.report()
        world.close()
    return time.process_time() - started


def in_sandbox(runs: list[tuple[dict, list[dict]]]) -> tuple[float, float]:
    """(the env server's CPU, this process's CPU) for the runs' real worlds."""
    runtime = get_runtime("sandbox")
    try:
        runtime.open_world(runs[0][0], "real").close()  # the server started and its domains imported
        server, own = servers_cpu(runtime), own_cpu()
        for spec, requests in runs:  # as a batch sends them: the load, then the run's calls and its report
            pending = open_ahead(runtime, spec, "real")
            outcomes = pending.call_each(requests, then_report=True)
            world = pending.result()
            world.snapshot()
            for _ in outcomes:
                pass
            world.report()
            world.close()
        return servers_cpu(runtime) - server, own_cpu() - own
    finally:
        runtime.close()


def _one_pass(runs: list[tuple[dict, list[dict]]], sandbox_first: bool) -> tuple[float, float, float]:
    """(in process, the env server's, this process's) CPU seconds for the runs' real worlds."""
    if sandbox_first:
        server, client = in_sandbox(runs)
        return in_process(runs), server, client
    alone = in_process(runs)
    return (alone, *in_sandbox(runs))


def cold_start(spec: dict, starts: int) -> float:
    """CPU seconds per sandbox started, given one world and stopped, all its processes counted."""
    runtime = get_runtime("sandbox", reuse=0, warm=False)  # no host kept, none started ahead
    runtime.open_world(spec, "real").close()  # the runtime's own checks, before the clock
    reap_orphans()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = own_cpu()
    for _ in range(starts):
        runtime.open_world(spec, "real").close()
    runtime.close()
    reap_orphans()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
    return (children + own_cpu() - own) / starts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worlds", type=int, default=150, help="runs per task world (one server hosts them all)")
    parser.add_argument("--starts", type=int, default=10)
    parser.add_argument("--passes", type=int, default=3, help="each world's figures are the median of this many")
    args = parser.parse_args()
    adopt_orphans()
    print(f"# sandbox_servers.py --worlds {args.worlds} --starts {args.starts} --passes {args.passes}")
    print(f"# python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; load average "
          + " ".join(f"{value:.2f}" for value in os.getloadavg()))
    plans = plans_by_world(args.worlds)
    print(f"{'task world':18} {'worlds':>6} {'calls':>6} {'in process':>10} {'server':>8} {'client':>8} "
          f"{'sandbox / in process':>21}   (CPU ms per world)")
    totals = [0.0, 0.0, 0.0]
    for key, runs in sorted(plans.items()):
        # the median of --passes (one pass's figures drift by a fifth), in-process and sandbox taking turns
        # in both orders; a pass's figures stay together: the pass whose ratio is the median
        passes = [_one_pass(runs, sandbox_first=index % 2 == 1) for index in range(args.passes)]
        alone, server, client = sorted(passes, key=lambda figures: (figures[1] + figures[2]) / figures[0])[len(passes) // 2]
        count = len(runs)
        calls = sum(len(requests) for _, requests in runs)
        for index, value in enumerate((alone, server, client)):
            totals[index] += value
        print(f"{key:18} {count:6d} {calls:6d} {1000 * alone / count:10.2f} {1000 * server / count:8.2f} "
              f"{1000 * client / count:8.2f} {(server + client) / alone:20.2f}x")
    alone, server, client = totals
    print(f"{'all':18} {'':6} {'':6} {'':10} {'':8} {'':8} {(server + client) / alone:20.2f}x")
    spec = next(iter(plans.values()))[0][0]
    print(f"a sandbox's cold start (launcher, bubblewrap, server, one world): {1000 * cold_start(spec, args.starts):.1f} "
          f"ms CPU, {args.starts} starts")


if __name__ == "__main__":
    main()
