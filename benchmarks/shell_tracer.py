"""What watching a command from outside costs, per command (each fork, exec and exit is a stop the
tracer resumes; nothing else is stopped).

    python benchmarks/shell_tracer.py [--runtime sandbox|docker|none] [--calls 30]

1. The tracer's own cost: the benchmark's own commands run here (in a child process, as ``run_command``
   runs them, without the isolation), traced and with ptrace refused (the command then runs untraced
   under the same tracer process), median per command side by side.
2. ``run_command`` round trips in an isolated world of ``--runtime``, median per call.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import platform
import shutil
import statistics
import time
from concurrent.futures import ProcessPoolExecutor

from litmus_replay.envs.domains import _command, _trace
from litmus_replay.envs.domains.shell import PRELUDE
from litmus_replay.envs.runtime import get_runtime

WORLD = {"principals": ["alice"], "shell": {"timeout": 20, "max_timeout": 20, "processes": 256}}
COMMANDS = {
    "true": "true",
    "200 builtins": "for i in $(seq 200); do :; done",
    "200 execs": "for i in $(seq 200); do /bin/true; done",
    "50 subshells, 50 failures": "for i in $(seq 50); do ( /bin/false ) ; done; true",
    "1 MiB through a pipe": "head -c 1048576 /dev/zero | wc -c",
}


def _local(command: str, calls: int, traced: bool) -> float:
    """Median seconds of ``_command.run`` here (run in a child process: it reaps all its caller's children)."""
    if not traced:
        _trace.trace_me = lambda: False
    bash = shutil.which("bash") or "/bin/bash"
    spec = _command.Command(executable=bash, argv=["bash", "--noprofile", "--norc", "-c", PRELUDE + command],
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, cwd="/", timeout=20)
    times = []
    for _ in range(calls + 1):
        started = time.perf_counter()
        result = _command.run(spec)
        times.append(time.perf_counter() - started)
        assert result.trace.traced == traced and result.exit_code == 0, result
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="sandbox")
    parser.add_argument("--calls", type=int, default=30)
    args = parser.parse_args()
    print(f"# shell_tracer.py --runtime {args.runtime} --calls {args.calls}")
    print(f"# python {platform.python_version()} on {platform.machine()}; medians")
    print(f"{'command':28} {'untraced':>9} {'traced':>9} {'in ' + args.runtime:>12}")
    context = multiprocessing.get_context("fork")
    handle = runtime = None
    if args.runtime != "none":
        runtime = get_runtime(args.runtime)
        handle = runtime.open_world(WORLD, "real")
    try:
        for name, command in COMMANDS.items():
            figures = []
            for traced in (False, True):
                with ProcessPoolExecutor(1, mp_context=context) as pool:
                    figures.append(pool.submit(_local, command, args.calls, traced).result())
            end_to_end = ""
            if handle is not None:
                request = {"tool": "run_command", "params": {"command": command}, "principal": "alice"}
                handle.call(request)  # warm up
                times = []
                for _ in range(args.calls):
                    started = time.perf_counter()
                    assert handle.call(request)["status"] == "ok"
                    times.append(time.perf_counter() - started)
                end_to_end = f"{statistics.median(times) * 1000:9.1f} ms"
            print(f"{name:28} {figures[0] * 1000:6.1f} ms {figures[1] * 1000:6.1f} ms {end_to_end:>12}")
    finally:
        if handle is not None:
            handle.close()
        if runtime is not None:
            runtime.close()


if __name__ == "__main__":
    main()
