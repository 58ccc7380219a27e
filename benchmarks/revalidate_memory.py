"""Re-validating ever larger generated corpora: peak memory of the batch process and of its largest
worker, and seconds per 1,000 runs, with the local process pool and with Dask. Memory should stay flat
and time grow linearly with the runs, on either executor.

    python benchmarks/revalidate_memory.py [--sizes 1000 10000 100000] [--executors pool dask]
                                           [--runtime inprocess] [--jobs 2] [--corpora DIR]

Each size is a corpus written by ``litmus-replay corpus --n N`` (kept in ``--corpora`` to be reused by a
later run; its writing is measured apart: wall and CPU seconds per 1,000 runs and the writer's peak
memory), re-validated from an empty output directory in a fresh process (so each peak is its own), with
the default report mode. ``pool`` is ``--jobs`` worker processes; ``dask`` is a ``LocalCluster`` of
``--jobs`` worker processes of one thread each, started, and the package imported in each, before the
clock (as the pool's workers, forked from the batch, have it); its scheduler runs in the batch process,
so the batch's peak includes it. Seconds are whole batches: discovery, replay, results, summary, pages
and index.

On a shared machine the wall seconds move with the load (printed before and after each batch). The CPU
seconds do much less: they are the batch process's and every worker's user and system time (with their
env servers, sandboxes included), taken over the batch alone. Time is linear when the CPU seconds per
1,000 runs stay level from size to size; cores busy is CPU over wall time.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from litmus_replay.replay import batch
corpus, out, runtime, jobs, executor = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
sys.path.insert(0, sys.argv[6])
from _orphans import adopt_orphans, reap_orphans
adopt_orphans()

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

def cpu():
    # this process and its waited-for descendants (the pool's workers, once joined; env servers, adopted)
    return sum(u.ru_utime + u.ru_stime for u in map(resource.getrusage, (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)))

options, client = {}, None
if executor == "dask":
    from dask.distributed import Client, LocalCluster
    cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None)
    options = {"executor": "dask", "scheduler": cluster.scheduler_address}
    client = Client(cluster.scheduler_address)
    client.run(__import__, "litmus_replay.replay.batch")  # as the pool's forked workers are: the package imported

def total_cpu():
    # Dask's workers are not this process's to wait for until the cluster closes: each says its own
    return cpu() + (sum(client.run(cpu).values()) if client else 0.0)

cpu_before = total_cpu()
started = time.perf_counter()
summary = batch.run_batch([corpus + "/runs"], corpus + "/worlds", out, runtime=runtime, jobs=jobs, **options)
seconds = time.perf_counter() - started
if client:
    # the cluster's workers say their own CPU (and are this process's children until it closes, so the
    # orphans are reaped only then; with --runtime sandbox their env servers' CPU is not counted)
    cpu_seconds = total_cpu() - cpu_before
    worker_mb = max(client.run(peak).values())
    client.close()
    cluster.close()
    reap_orphans()
else:
    reap_orphans()  # env servers whose launcher ended first
    cpu_seconds = total_cpu() - cpu_before
    worker_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"runs": summary["runs"], "seconds": seconds, "cpu": cpu_seconds, "batch_mb": peak(),
                  "worker_mb": worker_mb, "flagged": len(summary["over_penalised"]) + len(summary["under_penalised"])}))
"""


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def corpus(size: int, directory: Path) -> Path:
    """The corpus of ``size`` runs in ``directory``, written there the first time (saying what that took)."""
    path = directory / f"corpus-{size}"
    if (path / "manifest.json").is_file():
        print(f"# corpus of {size} runs: reused from {path}", flush=True)
        return path
    before = load()
    started = time.perf_counter()
    process = subprocess.Popen([sys.executable, "-m", "litmus_replay.replay", "corpus", "--n", str(size), "--out", str(path)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    stderr = process.stderr.read().decode() if process.stderr else ""
    if process.returncode != 0:
        raise SystemExit(f"corpus --n {size}: {stderr.strip().splitlines()[-1:]}")
    cpu = usage.ru_utime + usage.ru_stime
    print(f"# corpus of {size} runs: written in {wall:.1f} s, {cpu / size * 1000:.2f} CPU s / 1,000 runs, "
          f"peak {usage.ru_maxrss / 1024:.0f} MB; load {before} -> {load()}", flush=True)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--executors", nargs="+", choices=("pool", "dask"), default=["pool", "dask"])
    parser.add_argument("--runtime", default="inprocess")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--corpora", type=Path, help="keep the generated corpora here, and reuse them")
    args = parser.parse_args()
    print(f"# revalidate_memory.py --runtime {args.runtime} --jobs {args.jobs} --executors {' '.join(args.executors)}")
    print(f"# python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; generated inspect corpora")
    print(f"{'runs':>8} {'executor':>8} {'wall s':>8} {'wall s / 1k':>11} {'CPU s / 1k':>10} {'cores':>5} "
          f"{'batch MB':>8} {'worker MB':>9}  load average before -> after (1, 5, 15 min)", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        corpora = args.corpora or Path(tmp)
        corpora.mkdir(parents=True, exist_ok=True)
        for size in args.sizes:
            source = corpus(size, corpora)
            for executor in args.executors:
                out = Path(tmp) / f"out-{size}-{executor}"
                before = load()
                started = time.perf_counter()
                proc = subprocess.run([sys.executable, "-c", CHILD, str(source), str(out), args.runtime, str(args.jobs),
                                       executor, str(Path(__file__).resolve().parent)], check=True, capture_output=True, text=True)
                wall = time.perf_counter() - started
                figures = json.loads(proc.stdout.strip().splitlines()[-1])
                seconds, cpu, runs = figures["seconds"], figures["cpu"], figures["runs"]
                print(f"{runs:>8} {executor:>8} {seconds:>8.1f} {seconds / runs * 1000:>11.2f} {cpu / runs * 1000:>10.2f} "
                      f"{cpu / seconds:>5.2f} {figures['batch_mb']:>8.0f} {figures['worker_mb']:>9.0f}  {before} -> {load()}"
                      f"  (process {wall:.1f} s)", flush=True)
                shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
