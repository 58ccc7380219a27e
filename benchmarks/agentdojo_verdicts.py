"""AgentDojo runs re-validated: the findings by original verdict, agreement with AgentDojo's own checks, the
runs no world served, and the batch's wall and CPU time (a ratio against another installation, measured in
the same run, with ``--against``).

    python benchmarks/agentdojo_verdicts.py RUNS [RUNS ...] [--jobs 2] [--against OTHER_PYTHON]

RUNS are directories of published AgentDojo run logs (distinct runs, never copies). Each installation runs
``revalidate --format agentdojo --reports none`` as a whole process; CPU is the process's and its workers'.
With ``--against``, the other interpreter (a virtual environment holding another version of litmus-replay)
runs the same command right after, so the two figures share the machine's moment.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def revalidate(python: str, runs: list[str], jobs: int) -> tuple[dict, float, float]:
    """The summary, wall seconds and CPU seconds of one whole ``revalidate`` process."""
    out = Path(tempfile.mkdtemp(prefix="agentdojo-verdicts-")) / "out"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([python, "-m", "litmus_replay.replay", "revalidate", *runs, "--format", "agentdojo",
                    "--jobs", str(jobs), "--reports", "none", "--out", str(out)],
                   check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return json.loads((out / "summary.json").read_text()), wall, cpu


def show(name: str, summary: dict, wall: float, cpu: float) -> None:
    runs = summary["runs"]
    print(f"{name}: {runs} runs in {wall:.1f} s wall, {cpu:.1f} s CPU ({1000 * cpu / max(runs, 1):.1f} ms CPU per run)")
    findings = summary.get("findings") or {}
    if findings:
        columns = sorted({finding for row in findings.values() for finding in row})
        print("  original verdict | " + " | ".join(columns))
        for original, row in findings.items():
            print(f"  {original} | " + " | ".join(str(row.get(column, 0)) for column in columns))
    for check, rate in sorted(((summary.get("checks") or {}).get("agreement") or {}).items()):
        print(f"  {check} agreement: {rate['agree']}/{rate['runs']} ({100 * rate['agree'] / rate['runs']:.2f} %)")
    print(f"  missing world: {len(summary.get('missing_world') or [])} · over-penalised: "
          f"{len(summary.get('over_penalised') or [])} · under-penalised: {len(summary.get('under_penalised') or [])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="directories of AgentDojo run logs")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--against", metavar="PYTHON", help="another installation's interpreter, for a ratio")
    args = parser.parse_args()
    print(f"# agentdojo_verdicts.py {' '.join(sys.argv[1:])}")
    print(f"# python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs; "
          f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    summary, wall, cpu = revalidate(sys.executable, args.runs, args.jobs)
    show("this installation", summary, wall, cpu)
    if args.against:
        other, other_wall, other_cpu = revalidate(args.against, args.runs, args.jobs)
        show("against", other, other_wall, other_cpu)
        print(f"ratio (this / against): CPU {cpu / other_cpu:.2f}, wall {wall / other_wall:.2f}")


if __name__ == "__main__":
    main()
