"""Re-validating the shipped 1,200-run corpus: wall time and runs per second with the sandbox runtime
and two worker processes, and the overhead of a Dask LocalCluster against the local process pool.

    python benchmarks/revalidate_corpus.py [--runtime sandbox] [--jobs 2] [--no-dask]

Each measurement starts from an empty output directory (nothing to resume) and includes loading the
runs, replaying them, the graph and detectors, and writing results.jsonl, summary.json, one HTML
report per run and the index. Goal: at most 10 s for the 1,200 runs on a 2-core machine.
"""

from __future__ import annotations

import argparse
import platform
import shutil
import tempfile
import time
from pathlib import Path

from litmus_replay.replay import batch

CORPUS = Path(__file__).resolve().parent.parent / "corpus"


def timed(out: Path, **options) -> tuple[float, dict]:
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    summary = batch.run_batch([CORPUS / "runs"], CORPUS / "worlds", out, **options)
    return time.perf_counter() - started, summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="sandbox")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--no-dask", action="store_true")
    args = parser.parse_args()
    print(f"# revalidate_corpus.py --runtime {args.runtime} --jobs {args.jobs}")
    print(f"# python {platform.python_version()} on {platform.machine()}; corpus: {CORPUS.name}/ (1,200 inspect runs)")
    with tempfile.TemporaryDirectory() as tmp:
        seconds, summary = timed(Path(tmp) / "pool", runtime=args.runtime, jobs=args.jobs)
        print(f"process pool, {args.jobs} jobs: {summary['runs']} runs in {seconds:.2f} s = {summary['runs'] / seconds:.0f} runs/s "
              f"(over-penalised {len(summary['over_penalised'])}, under-penalised {len(summary['under_penalised'])})")
        if args.no_dask:
            return
        from dask.distributed import LocalCluster

        with LocalCluster(n_workers=args.jobs, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
            dask_seconds, dask_summary = timed(Path(tmp) / "dask", runtime=args.runtime, executor="dask",
                                               scheduler=cluster.scheduler_address)
        assert dask_summary == summary
        print(f"dask LocalCluster, {args.jobs} workers: {dask_seconds:.2f} s = {summary['runs'] / dask_seconds:.0f} runs/s; "
              f"overhead against the process pool: {dask_seconds / seconds:.2f}x (cluster start not counted)")


if __name__ == "__main__":
    main()
