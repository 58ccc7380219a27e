"""Re-validating ever larger generated corpora: peak memory of the batch process and of its largest
worker, and seconds per 1,000 runs. Memory should stay flat and time grow linearly with the runs.

    python benchmarks/revalidate_memory.py [--sizes 1000 10000 100000] [--runtime inprocess] [--jobs 2]

Each size is a corpus written by ``litmus-replay corpus --n N`` (not timed), re-validated from an empty
output directory in a fresh process (so each peak is its own), with the default report mode.
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = r"""
import json, resource, sys, time
from litmus_replay.replay import batch
corpus, out, runtime, jobs = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
started = time.perf_counter()
summary = batch.run_batch([corpus + "/runs"], corpus + "/worlds", out, runtime=runtime, jobs=jobs)
seconds = time.perf_counter() - started
print(json.dumps({"runs": summary["runs"], "seconds": seconds,
                  "batch_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "worker_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--runtime", default="inprocess")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    print(f"# revalidate_memory.py --runtime {args.runtime} --jobs {args.jobs}")
    print(f"# python {platform.python_version()} on {platform.machine()}; generated inspect corpora")
    print(f"{'runs':>8} {'seconds':>9} {'s / 1,000 runs':>15} {'batch peak MB':>14} {'worker peak MB':>15}")
    for size in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            corpus = Path(tmp) / "corpus"
            subprocess.run([sys.executable, "-m", "litmus_replay.replay", "corpus", "--n", str(size), "--out", str(corpus)],
                           check=True, capture_output=True)
            started = time.perf_counter()
            proc = subprocess.run([sys.executable, "-c", CHILD, str(corpus), str(Path(tmp) / "out"), args.runtime,
                                   str(args.jobs)], check=True, capture_output=True, text=True)
            wall = time.perf_counter() - started
            figures = json.loads(proc.stdout.strip().splitlines()[-1])
            print(f"{figures['runs']:>8} {wall:>9.1f} {wall / figures['runs'] * 1000:>15.2f} "
                  f"{figures['batch_mb']:>14.0f} {figures['worker_mb']:>15.0f}", flush=True)


if __name__ == "__main__":
    main()
