"""What watching a command from outside costs: ``run_command`` round trips in an isolated world, for
commands that start few and many processes (each fork, exec and exit is a stop the tracer resumes).

    python benchmarks/shell_tracer.py [--runtime sandbox|docker] [--calls 30]

Prints the median time per call. Run it from a checkout without the tracer to see what the tracer adds.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from litmus_replay.envs.runtime import get_runtime

WORLD = {"principals": ["alice"], "shell": {"timeout": 20, "max_timeout": 20, "processes": 256}}
COMMANDS = {
    "true": "true",
    "200 builtins": "for i in $(seq 200); do :; done",
    "200 execs": "for i in $(seq 200); do /bin/true; done",
    "50 subshells, 50 failures": "for i in $(seq 50); do ( /bin/false ) ; done; true",
    "1 MiB through a pipe": "head -c 1048576 /dev/zero | wc -c",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="sandbox")
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    print(f"# shell_tracer.py --runtime {args.runtime} --calls {args.calls}")
    print(f"# python {platform.python_version()} on {platform.machine()}; median per call")
    with get_runtime(args.runtime) as runtime:
        handle = runtime.open_world(WORLD, "real")
        try:
            for name, command in COMMANDS.items():
                request = {"tool": "run_command", "params": {"command": command}, "principal": "alice"}
                handle.call(request)  # warm up
                times = []
                for _ in range(args.calls):
                    started = time.perf_counter()
                    outcome = handle.call(request)
                    times.append(time.perf_counter() - started)
                    assert outcome["status"] == "ok", outcome
                print(f"{name:28} {statistics.median(times) * 1000:8.1f} ms")
        finally:
            handle.close()


if __name__ == "__main__":
    main()
