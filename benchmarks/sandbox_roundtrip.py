"""What the sandbox runtime costs: opening a world (cold, and from the warm spare) and one call's round trip.

    python benchmarks/sandbox_roundtrip.py [--calls 500] [--worlds 10] [--backend auto|bwrap|native]

* open cold: a fresh sandbox per world (``warm=False``): launcher, namespaces, env server start, hello, load.
* open warm spare (``reuse=0``): the next world's sandbox boots while the current one runs: back to back
  (the spare has barely started), and with each world held half a second, as a short replay holds it.
* open reused (the default): a sandbox whose last world touched only contained domains is reloaded.
* round trip: ``World.call`` through the env server protocol over the sandbox's pipes, median of
  ``--calls``, beside the same call on an in-process world. ``run_command`` includes fork, the uid
  switch, bash's start and the kill-and-reap of what the command left (nothing, here).
Run as root it measures root's id mapping; as an ordinary user, that user's (``sandbox_rootless.py`` puts
them side by side).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time

from litmus_replay.envs.runtime import get_runtime

WORLD = {"principals": ["alice", "bob"], "shell": {}, "files": {"tree": {"/workspace/a.txt": "hello\n"}}}
READ = {"tool": "read_file", "params": {"path": "/workspace/a.txt"}, "principal": "alice"}
SHELL = {"tool": "run_command", "params": {"command": "true"}, "principal": "alice"}


def _opens(runtime, worlds: int, busy: float = 0.0) -> list[float]:
    """Open and close worlds, each held ``busy`` seconds (as if its trajectory were replaying)."""
    times = []
    for _ in range(worlds):
        started = time.perf_counter()
        handle = runtime.open_world(WORLD, "real")
        times.append(time.perf_counter() - started)
        time.sleep(busy)
        handle.close()
    return times


def _round_trip(handle, request, calls: int) -> float:
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        handle.call(request)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--worlds", type=int, default=10)
    parser.add_argument("--backend", default="auto")
    args = parser.parse_args()
    print(f"# sandbox_roundtrip.py --calls {args.calls} --worlds {args.worlds} --backend {args.backend}")
    print(f"# python {platform.python_version()} on {platform.machine()}, medians")

    started = time.perf_counter()
    cold = get_runtime("sandbox", backend=args.backend, warm=False, reuse=0)
    print(f"runtime start (one probe sandbox): {1000 * (time.perf_counter() - started):.0f} ms ({cold.backend})")
    try:
        print(f"open world, cold: {1000 * statistics.median(_opens(cold, args.worlds)):.0f} ms")
    finally:
        cold.close()
    spare = get_runtime("sandbox", backend=args.backend, reuse=0)
    try:
        _opens(spare, 1)
        print(f"open world, warm spare, back to back: {1000 * statistics.median(_opens(spare, args.worlds)):.0f} ms")
        print(f"open world, warm spare, each world busy 0.5 s: "
              f"{1000 * statistics.median(_opens(spare, args.worlds, 0.5)):.0f} ms")
    finally:
        spare.close()
    warm = get_runtime("sandbox", backend=args.backend)
    try:
        _opens(warm, 1)
        print(f"open world, sandbox reused from the last clean world: {1000 * statistics.median(_opens(warm, args.worlds)):.1f} ms")
        handle = warm.open_world(WORLD, "real")
        try:
            sandbox_read = _round_trip(handle, READ, args.calls)
            sandbox_shell = _round_trip(handle, SHELL, max(args.calls // 10, 10))
        finally:
            handle.close()
    finally:
        warm.close()
    inprocess = get_runtime("inprocess")
    handle = inprocess.open_world(WORLD, "real")
    try:
        local_read = _round_trip(handle, READ, args.calls)
    finally:
        handle.close()
    print(f"read_file round trip: sandbox {1e6 * sandbox_read:.0f} µs, in-process {1e6 * local_read:.0f} µs")
    print(f"run_command 'true' round trip: sandbox {1000 * sandbox_shell:.1f} ms")


if __name__ == "__main__":
    sys.exit(main())
