"""How much of the host's memory one sandboxed command of many processes can take, with the world's
memory cgroup and without it.

    python benchmarks/world_memory.py [--processes 20] [--each 400]

One ``run_command`` starts ``--processes`` processes that each write ``--each`` MiB and hold it for five
seconds. The figure is the largest drop in the host's ``MemAvailable`` while the command runs (other work
on the machine moves it too), and how many processes lived to let go of their memory. "without" is the
sandbox where no memory cgroup is delegated: each process is held to its own address space only.
"""

from __future__ import annotations

import argparse
import threading
import time

from litmus_replay.envs.runtime import get_runtime
from litmus_replay.envs.runtimes import memory_cgroup

MiB = 1024 * 1024


def _available() -> int:
    with open("/proc/meminfo") as handle:
        return next(int(line.split()[1]) * 1024 for line in handle if line.startswith("MemAvailable:"))


def measure(processes: int, each: int) -> tuple[int, float]:
    """(processes that let go, GB of the host's available memory taken at the peak)."""
    runtime = get_runtime("sandbox")
    world = runtime.open_world({"principals": ["alice"],
                                "shell": {"timeout": 120, "max_timeout": 120, "memory": (each + 100) * MiB}}, "real")
    command = (f"for i in $(seq {processes}); do python3 -c 'import time; b = bytearray(b\"x\") * ({each} * 2**20); "
               "time.sleep(5); print(\"released\")' & done; wait")
    start = lowest = _available()
    done = threading.Event()

    def watch() -> None:
        nonlocal lowest
        while not done.is_set():
            lowest = min(lowest, _available())
            time.sleep(0.05)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        outcome = world.call({"tool": "run_command", "principal": "alice", "params": {"command": command}})
    finally:
        done.set()
        watcher.join()
        world.close()
        runtime.close()
    return outcome["output"]["stdout"].count("released"), (start - lowest) / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--processes", type=int, default=20)
    parser.add_argument("--each", type=int, default=400, help="MiB per process")
    args = parser.parse_args()
    found = memory_cgroup.find
    for label, finder in (("with", found), ("without", lambda: (None, "switched off"))):
        if label == "with" and found()[0] is None:
            print(f"{label:8} no memory cgroup is delegated here")
            continue
        memory_cgroup.find = finder
        try:
            released, taken = measure(args.processes, args.each)
        finally:
            memory_cgroup.find = found
        print(f"{label:8} {released:3}/{args.processes} processes released · host memory taken at peak {taken:.1f} GB")


if __name__ == "__main__":
    main()
