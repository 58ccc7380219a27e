"""Re-validating ever larger generated corpora: peak memory of the batch process and of its largest
worker, and seconds per 1,000 runs, with the local process pool and with Dask. Memory should stay flat
and time grow linearly with the runs, on either executor.

    python benchmarks/revalidate_memory.py [--sizes 1000 10000 100000] [--executors pool dask]
                                           [--runtime inprocess] [--jobs 2] [--corpora DIR]

Each size is a corpus written by ``litmus-replay corpus --n N`` (not timed; kept in ``--corpora`` to be
reused by a later run), re-validated from an empty output directory in a fresh process (so each peak is
its own), with the default report mode. ``pool`` is ``--jobs`` worker processes; ``dask`` is a
``LocalCluster`` of ``--jobs`` worker processes of one thread each, started, and the package imported
in each, before the clock (as the pool's workers, forked from the batch, have it); its scheduler runs in
the batch process, so the batch's peak includes it. Seconds are whole batches:
discovery, replay, results, summary, pages and index. The load average before each batch is printed
with it: the machine's other work slows the figure.
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

def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

options = {}
if executor == "dask":
    from dask.distributed import Client, LocalCluster
    cluster = LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None)
    options = {"executor": "dask", "scheduler": cluster.scheduler_address}
    with Client(cluster.scheduler_address) as client:  # as the pool's forked workers are: the package imported
        client.run(__import__, "litmus_replay.replay.batch")
started = time.perf_counter()
summary = batch.run_batch([corpus + "/runs"], corpus + "/worlds", out, runtime=runtime, jobs=jobs, **options)
seconds = time.perf_counter() - started
if executor == "dask":
    with Client(cluster.scheduler_address) as client:
        worker_mb = max(client.run(peak).values())
    cluster.close()
else:
    worker_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
print(json.dumps({"runs": summary["runs"], "seconds": seconds, "batch_mb": peak(), "worker_mb": worker_mb,
                  "flagged": len(summary["over_penalised"]) + len(summary["under_penalised"])}))
"""


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def corpus(size: int, directory: Path) -> Path:
    """The corpus of ``size`` runs in ``directory``, written there the first time."""
    path = directory / f"corpus-{size}"
    if not (path / "manifest.json").is_file():
        subprocess.run([sys.executable, "-m", "litmus_replay.replay", "corpus", "--n", str(size), "--out", str(path)],
                       check=True, capture_output=True)
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
    print(f"{'runs':>8} {'executor':>8} {'seconds':>9} {'s / 1,000 runs':>15} {'batch peak MB':>14} "
          f"{'worker peak MB':>15}  load average before (1, 5, 15 min)", flush=True)
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
                                       executor], check=True, capture_output=True, text=True)
                wall = time.perf_counter() - started
                figures = json.loads(proc.stdout.strip().splitlines()[-1])
                seconds = figures["seconds"]
                print(f"{figures['runs']:>8} {executor:>8} {seconds:>9.1f} {seconds / figures['runs'] * 1000:>15.2f} "
                      f"{figures['batch_mb']:>14.0f} {figures['worker_mb']:>15.0f}  {before}"
                      f"  (process {wall:.1f} s)", flush=True)
                shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
