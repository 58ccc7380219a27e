"""Per-call round trip of every runtime against the in-process world, with the floor beside them.

    python benchmarks/runtime_roundtrip.py [--calls 1000] [--runtimes inprocess sandbox docker]

For each runtime: the median wall time of one ``read_file`` call through its world handle (in-process:
a direct ``World.call``; sandbox: the env server over the sandbox's pipes; docker: the env server over
a unix socket into the container), as a ratio to the in-process call. The floor is the round trip of
one JSON line to a plain child process that echoes it back over a pipe: what any out-of-process world
pays before doing any work. Runtimes that cannot run here are reported as such, not skipped silently.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time

from litmus_replay.envs import RuntimeUnavailable
from litmus_replay.envs.runtime import get_runtime

WORLD = {"principals": ["alice"], "files": {"tree": {"/workspace/a.txt": "hello\n"}}}
READ = {"tool": "read_file", "params": {"path": "/workspace/a.txt"}, "principal": "alice"}
ECHO = "import sys\nfor line in sys.stdin:\n    sys.stdout.write(line)\n    sys.stdout.flush()\n"


def _median_call(handle, calls: int) -> float:
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        handle.call(READ)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def pipe_floor(calls: int) -> float:
    """One line to a plain child and back, over pipes."""
    child = subprocess.Popen([sys.executable, "-c", ECHO], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    line = (json.dumps({"id": 1, "op": "call", "request": READ}) + "\n").encode()
    times = []
    try:
        for _ in range(calls):
            started = time.perf_counter()
            child.stdin.write(line)
            child.stdin.flush()
            child.stdout.readline()
            times.append(time.perf_counter() - started)
    finally:
        child.kill()
        child.wait()
    return statistics.median(times)


def runtime_call(name: str, calls: int) -> float | str:
    try:
        runtime = get_runtime(name)
    except RuntimeUnavailable as exc:
        return f"unavailable: {exc}"
    try:
        with runtime.open_world(WORLD, "real") as handle:
            handle.call(READ)  # warm up: imports, caches
            return _median_call(handle, calls)
    finally:
        runtime.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--runtimes", nargs="+", default=["inprocess", "sandbox", "docker"])
    args = parser.parse_args()
    print(f"# runtime_roundtrip.py --calls {args.calls} --runtimes {' '.join(args.runtimes)}")
    print(f"# python {platform.python_version()} on {platform.machine()}; median of {args.calls} read_file calls")
    results = {name: runtime_call(name, args.calls) for name in args.runtimes}
    floor = pipe_floor(args.calls)
    base = results.get("inprocess")
    print(f"{'runtime':<28}{'µs/call':>10}{'vs inprocess':>14}")
    for name, value in [*results.items(), ("pipe floor (plain child)", floor)]:
        if isinstance(value, str):
            print(f"{name:<28}{value}")
            continue
        ratio = f"{value / base:.1f}x" if isinstance(base, float) else "-"
        print(f"{name:<28}{value * 1e6:>10.1f}{ratio:>14}")


if __name__ == "__main__":
    main()
