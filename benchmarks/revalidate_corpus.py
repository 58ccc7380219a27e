"""Re-validating the shipped 1,200-run corpus, the README's main job, with the sandbox and in-process
runtimes side by side: wall time, CPU seconds per run and cores kept busy; and the overhead of a Dask
LocalCluster against the local process pool.

    python benchmarks/revalidate_corpus.py [--rounds 4] [--jobs 2] [--reports flagged] [--no-dask]
                                           [--against PYTHON]

Each round runs ``litmus-replay revalidate corpus/runs --worlds corpus/worlds --out OUT --runtime R``
as a whole process (interpreter start, discovery, worker processes, sandboxes, results, summary, pages
and index all counted) into an empty output directory, the runtimes taking turns (every other round in
the reverse order, so that running second in a round favours no row) so that all see the same load; a
row's figure is its median round, and a ratio the median over rounds of the two rows' ratio in a round,
printed with a 90% interval for that median (drawn by bootstrap from the rounds) and the rounds' range.
CPU is the user + system time of the process and every process it started (workers, sandboxes and their
env servers, which this script adopts and reaps: see ``_orphans``); cores busy is CPU over wall time.
The machine's load average is printed with every figure, since other work on it slows both columns;
``--against PYTHON`` adds, in the same rounds, the rows of another installation (an interpreter whose
``litmus_replay`` is an earlier version), so the two compare under the same load.
Each installation's bytecode is compiled first, as ``pip install`` does: an editable install under
``PYTHONDONTWRITEBYTECODE`` never writes it, and every process (CLI, workers, env servers) would then
compile the package from source, about 0.25 s of CPU each. ``--source-only`` measures that case.
Goal: at most 5 s with the sandbox on two cores, at most 3.5 s in-process.

The floor is what no re-validation can skip: every run's calls made by its worlds' domains, in
process, one core, with nothing else — each run's stub and real worlds opened, each recorded call sent
to both as the batch sends it, the worlds closed; no policy, pairs, analysis, results or pages (the runs
read and their worlds found before the clock). It is measured in every round, in a process of its own
taking its turn with the batches, so that it sees the same load and the machine's drift; the in-process
batch's CPU per run is printed against it as the median of the rounds' own ratios, with its interval like
the wall ratios'. The goal is at most 2x.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _orphans import adopt_orphans, reap_orphans

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
RUNTIMES = ("sandbox", "inprocess")


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def run_once(out: Path, runtime: str, jobs: int, reports: str, python: str = sys.executable) -> tuple[float, float]:
    """Wall and CPU seconds of one whole ``revalidate`` process."""
    shutil.rmtree(out, ignore_errors=True)
    command = [python, "-m", "litmus_replay.replay", "revalidate", str(CORPUS / "runs"), "--worlds",
               str(CORPUS / "worlds"), "--out", str(out), "--runtime", runtime, "--jobs", str(jobs),
               "--reports", reports]
    before = cpu_of_children()
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=CORPUS.parent)
    _, status, _ = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    reap_orphans()  # env servers whose launcher ended first: their CPU counts too
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode() if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"{runtime}: exit {process.returncode}: {stderr.strip().splitlines()[-1:]}")
    return wall, cpu_of_children() - before


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


_COMPILE = """
import compileall, importlib, os
for name in ("replay", "envs", "adapters"):
    compileall.compile_dir(os.path.dirname(importlib.import_module("litmus_replay." + name).__file__), quiet=1)
"""


def compile_bytecode(python: str) -> None:
    """Write the installation's bytecode, as an install from a wheel does."""
    subprocess.run([python, "-c", _COMPILE], check=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})


def floor_per_run() -> tuple[float, int]:
    """CPU seconds per run of the corpus's calls alone, against in-process worlds (see the docstring), and
    how many runs: measured in this process (``--floor`` prints it; :func:`floor_once` starts one)."""
    from litmus_replay.envs.runtime import get_runtime
    from litmus_replay.replay.api import read_trajectories
    from litmus_replay.replay.session import Router, call_request
    from litmus_replay.replay.worlds import WorldCatalog

    catalog = WorldCatalog.load(CORPUS / "worlds", providers=False)
    plans = []
    for trajectory in (run for path in sorted((CORPUS / "runs").iterdir()) for run in read_trajectories(path)):
        world = catalog.find(trajectory)
        route = Router(world.tools, world.bindings)
        requests = [call_request(call, trajectory.principal, trajectory.ambient_session, route,
                                 world.policy.uses_state)[2] for _, call in trajectory.calls()]
        plans.append((world.world, [request for request in requests if request is not None]))
    runtime = get_runtime("inprocess")
    started = time.process_time()
    for spec, requests in plans:
        stub, real = runtime.open_world(spec, "stub"), runtime.open_world(spec, "real")
        for request in requests:
            stub.call(request)
            real.call(request)
        stub.close()
        real.close()
    return (time.process_time() - started) / len(plans), len(plans)


def floor_once() -> tuple[float, int]:
    """The floor per run and how many runs, measured in a fresh interpreter like the batches it is set
    against."""
    completed = subprocess.run([sys.executable, __file__, "--floor"], capture_output=True, text=True)
    if completed.returncode != 0:
        raise SystemExit(f"floor: exit {completed.returncode}: {completed.stderr.strip().splitlines()[-1:]}")
    seconds, count = completed.stdout.split()[:2]
    return float(seconds), int(count)


def median_interval(values: list[float], draws: int = 2000, seed: int = 0) -> tuple[float, float]:
    """The 5th and 95th percentiles of the median of ``values`` resampled with replacement (a bootstrap):
    where the median of another set of as many rounds would likely fall on this machine."""
    chooser = random.Random(seed)
    medians = sorted(statistics.median(chooser.choices(values, k=len(values))) for _ in range(draws))
    return medians[int(0.05 * draws)], medians[int(0.95 * draws) - 1]


def runs_in(out: Path) -> int:
    with open(out / "results.jsonl", "rb") as handle:
        return sum(1 for _ in handle)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="an even number runs each order as often")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--reports", default="flagged", choices=("all", "flagged", "none"))
    parser.add_argument("--no-dask", action="store_true")
    parser.add_argument("--against", metavar="PYTHON", help="also time the litmus_replay this interpreter imports")
    parser.add_argument("--source-only", action="store_true", help="do not compile bytecode first")
    parser.add_argument("--floor", action="store_true", help="print the floor's CPU seconds per run and its runs")
    args = parser.parse_args()
    if args.floor:
        seconds, count = floor_per_run()
        print(f"{seconds!r} {count}")
        return
    adopt_orphans()
    print(f"# revalidate_corpus.py --rounds {args.rounds} --jobs {args.jobs} --reports {args.reports}"
          + (f" --against {args.against}" if args.against else "") + (" --source-only" if args.source_only else ""))
    print(f"# python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; corpus: "
          f"{CORPUS.name}/ (1,200 inspect runs); whole processes, runtimes alternating (every other round in reverse), median of {args.rounds}; "
          + ("no bytecode compiled" if args.source_only else "bytecode compiled first"))
    pythons = {"": sys.executable, **({" (against)": args.against} if args.against else {})}
    if not args.source_only:
        for python in pythons.values():
            compile_bytecode(python)
    labels = [(f"{runtime}{tag}", runtime, python) for tag, python in pythons.items() for runtime in RUNTIMES]
    labels.append(("floor", "", sys.executable))  # the calls alone, this installation's, in their turn
    rows: dict[str, list[tuple[float, float, str]]] = {label: [] for label, _, _ in labels}
    with tempfile.TemporaryDirectory() as tmp:
        runs = floor_runs = 0
        for round_index in range(args.rounds):
            # every other round in the reverse order: whatever runs second in a round (a warmer or a
            # hotter machine) favours neither row
            for label, runtime, python in (labels if round_index % 2 == 0 else labels[::-1]):
                before = load()
                if label == "floor":
                    floor, floor_runs = floor_once()
                    rows[label].append((0.0, floor, before))
                    continue
                wall, cpu = run_once(Path(tmp) / runtime, runtime, args.jobs, args.reports, python)
                rows[label].append((wall, cpu, before))
                runs = runs_in(Path(tmp) / runtime)
        print(f"{'runtime':20} {'wall s':>7} {'runs/s':>7} {'CPU s':>6} {'CPU ms/run':>10} {'cores busy':>10}  "
              f"load average before each round (1, 5, 15 min)")
        for label in (label for label, _, _ in labels if label != "floor"):
            wall = statistics.median(entry[0] for entry in rows[label])
            cpu = statistics.median(entry[1] for entry in rows[label])
            loads = "; ".join(entry[2] for entry in rows[label])
            print(f"{label:20} {wall:7.2f} {runs / wall:7.0f} {cpu:6.2f} {1000 * cpu / runs:10.2f} "
                  f"{cpu / wall:10.2f}  {loads}")

        def median_ratio(ratios: list[float]) -> str:
            """The median of the rounds' ratios; how sure that median is (the middle 90% of the medians of
            the rounds drawn again at random, with replacement); and the lowest and highest round's: one
            round alone may land anywhere between."""
            ratios = sorted(ratios)
            low, high = median_interval(ratios)
            return (f"{statistics.median(ratios):.2f}x (90% interval {low:.2f} to {high:.2f}; "
                    f"rounds {ratios[0]:.2f} to {ratios[-1]:.2f})")

        def median_wall(label: str, over: str) -> str:
            """``label``'s wall time against ``over``'s in the same round, over the rounds."""
            return median_ratio([mine[0] / theirs[0] for mine, theirs in zip(rows[label], rows[over])])

        floors = [entry[1] for entry in rows["floor"]]
        inprocess_cpu = statistics.median(entry[1] for entry in rows["inprocess"]) / runs
        print(f"floor: the calls alone against in-process worlds, one core, {floor_runs} runs, in each round: "
              f"{1000 * statistics.median(floors):.2f} ms CPU per run (rounds {1000 * min(floors):.2f} to "
              f"{1000 * max(floors):.2f}); the in-process batch: {1000 * inprocess_cpu:.2f} ms; its CPU per run "
              f"against the floor of its round: "
              f"{median_ratio([entry[1] / runs / floor for entry, floor in zip(rows['inprocess'], floors)])} "
              f"(goal: at most 2x)")
        print(f"{runs} runs; median of the rounds' ratios: sandbox / inprocess wall: "
              f"{median_wall('sandbox', 'inprocess')}"
              + (f"; against: {median_wall('sandbox (against)', 'inprocess (against)')}" if args.against else "")
              + "".join(f"; {runtime} against / this: {median_wall(runtime + ' (against)', runtime)}"
                        for runtime in RUNTIMES if args.against))
        if not args.no_dask:
            dask_overhead(Path(tmp), args.jobs)


def dask_overhead(tmp: Path, jobs: int) -> None:
    """The sandbox batch on a Dask LocalCluster against the local process pool, in this process."""
    from dask.distributed import LocalCluster

    from litmus_replay.replay import batch

    def timed(out: Path, **options) -> tuple[float, dict]:
        shutil.rmtree(out, ignore_errors=True)
        started = time.perf_counter()
        summary = batch.run_batch([CORPUS / "runs"], CORPUS / "worlds", out, **options)
        return time.perf_counter() - started, summary

    seconds, summary = timed(tmp / "pool", runtime="sandbox", jobs=jobs)
    with LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        dask_seconds, dask_summary = timed(tmp / "dask", runtime="sandbox", executor="dask",
                                           scheduler=cluster.scheduler_address)
    assert dask_summary == summary
    print(f"dask LocalCluster, {jobs} workers: {dask_seconds:.2f} s against the process pool's {seconds:.2f} s in "
          f"the same process: {dask_seconds / seconds:.2f}x (cluster start not counted; load {load()})")


if __name__ == "__main__":
    main()
