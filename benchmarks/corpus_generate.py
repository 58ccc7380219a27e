"""Writing generated corpora (``litmus-replay corpus --n N``) of growing size: wall and CPU seconds per
1,000 runs and the writer's peak memory. Memory should stay flat and time grow linearly with the runs.

    python benchmarks/corpus_generate.py [--sizes 1000 10000 100000] [--format inspect] [--against PYTHON]

Each size is one whole process writing into an empty directory (interpreter start and imports counted);
CPU is its user and system time, peak its largest resident set. ``--against PYTHON`` writes each size
with another installation too (an interpreter whose ``litmus_replay`` is an earlier version), right after,
so the two compare under the same load; the machine's load average is printed beside every figure.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def write_once(python: str, size: int, fmt: str, out: Path) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds and peak MB of one ``corpus`` process."""
    shutil.rmtree(out, ignore_errors=True)
    command = [python, "-m", "litmus_replay.replay", "corpus", "--n", str(size), "--format", fmt, "--out", str(out)]
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode() if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"{python} corpus --n {size}: exit {process.returncode}: {stderr.strip().splitlines()[-1:]}")
    shutil.rmtree(out, ignore_errors=True)
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--format", default="inspect", choices=("inspect", "native", "openai-chat"))
    parser.add_argument("--against", metavar="PYTHON", help="also time another installation's interpreter")
    args = parser.parse_args()
    pythons = [("this", sys.executable)] + ([("against", args.against)] if args.against else [])
    print(f"# corpus_generate.py --format {args.format}" + (f" --against {args.against}" if args.against else ""))
    print(f"# python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores")
    print(f"{'runs':>8} {'code':>8} {'wall s':>8} {'wall s / 1k':>11} {'CPU s / 1k':>10} {'peak MB':>8}"
          "  load average before -> after (1, 5, 15 min)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for size in args.sizes:
            for name, python in pythons:
                before = load()
                wall, cpu, peak = write_once(python, size, args.format, Path(tmp) / "corpus")
                print(f"{size:>8} {name:>8} {wall:>8.1f} {wall / size * 1000:>11.2f} {cpu / size * 1000:>10.2f} "
                      f"{peak:>8.0f}  {before} -> {load()}", flush=True)


if __name__ == "__main__":
    main()
