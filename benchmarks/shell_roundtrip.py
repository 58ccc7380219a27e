"""What one shell command costs in each isolated runtime, and how the world's shape moves it.

    python benchmarks/shell_roundtrip.py [--calls 50] [--runtimes sandbox docker]

The median wall time of one ``run_command`` of ``true`` through a world handle: fork, the command's own
root (a mount namespace with the world's top-level entries and the system's directories bound into it),
shedding capabilities, the uid switch, bash's start, the kill-and-reap afterwards and the snapshots that
give the call its effects. Three worlds: *small* (a workspace with one file), *wide* (40 top-level
entries), and *merged* (a world with files under ``/etc`` and ``/usr/local``, merged into the system's
read-only directories entry by entry). Runtimes that cannot run here are reported as such.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from litmus_replay.envs import RuntimeUnavailable
from litmus_replay.envs.runtime import get_runtime

BASE = {"principals": ["alice", "bob"], "shell": {}}
WORLDS = {
    "small": {"/workspace/a.txt": "hello\n"},
    "wide": {"/workspace/a.txt": "hello\n", **{f"/srv{i}/data.txt": f"{i}\n" for i in range(39)}},
    "merged": {"/workspace/a.txt": "hello\n", "/etc/app.conf": "k=v\n", "/etc/app.d/one.conf": "x\n",
               "/usr/local/share/app/data.txt": "d\n"},
}
SHELL = {"tool": "run_command", "params": {"command": "true"}, "principal": "alice"}


def median_command(runtime, tree: dict, calls: int) -> float:
    with runtime.open_world({**BASE, "files": {"tree": tree}}, "real") as handle:
        handle.call(SHELL)  # warm up
        times = []
        for _ in range(calls):
            started = time.perf_counter()
            outcome = handle.call(SHELL)
            times.append(time.perf_counter() - started)
            if outcome["status"] != "ok":
                raise SystemExit(f"run_command failed: {outcome.get('error')}")
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--runtimes", nargs="+", default=["sandbox", "docker"])
    args = parser.parse_args()
    print(f"# shell_roundtrip.py --calls {args.calls} --runtimes {' '.join(args.runtimes)}")
    print(f"# python {platform.python_version()} on {platform.machine()}; median ms per run_command 'true'")
    print(f"{'runtime':<10}" + "".join(f"{name:>10}" for name in WORLDS))
    for name in args.runtimes:
        try:
            runtime = get_runtime(name)
        except RuntimeUnavailable as exc:
            print(f"{name:<10}unavailable: {exc}")
            continue
        try:
            row = [median_command(runtime, tree, args.calls) for tree in WORLDS.values()]
        finally:
            runtime.close()
        print(f"{name:<10}" + "".join(f"{1000 * value:>10.1f}" for value in row))


if __name__ == "__main__":
    main()
