"""Where a batch's wall time goes outside the workers' chunks: the shipped corpus re-validated once in
this process, with every chunk's start and end logged by the worker that ran it.

    python benchmarks/batch_timeline.py [--runtime inprocess] [--jobs 2] [--reports flagged] [--chunks]

Prints the command line's import time, how long the batch ran before the first chunk started (options,
the runtime check, the first runs found, the pool started), how long it ran after the last chunk ended
(results in order, page links, summary, index), and how busy each worker was in between: the parts of a
batch that two cores cannot share. ``--chunks`` lists every chunk. The load average is printed with it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

STARTED = time.perf_counter()
from litmus_replay.replay import cli  # noqa: E402,F401  (what `litmus-replay` imports before it runs a command)

IMPORTED = time.perf_counter()
from litmus_replay.replay import batch  # noqa: E402
from litmus_replay.replay.batch import run as batch_run  # noqa: E402

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
REPLAY_RUNS = batch.replay_runs
LOG = Path(tempfile.mkdtemp(prefix="batch-timeline-")) / "chunks.log"


def logged(runs, *rest, **options):
    """``replay_runs``, logging the chunk's pid, start and end (the pool forks: its workers run this too)."""
    start = time.perf_counter()
    lines = REPLAY_RUNS(runs, *rest, **options)
    with open(LOG, "a") as handle:
        handle.write(f"{os.getpid()} {start} {time.perf_counter()} {len(runs)}\n")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="inprocess")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--reports", default="flagged", choices=("all", "flagged", "none"))
    parser.add_argument("--chunks", action="store_true")
    args = parser.parse_args()
    batch_run.replay_runs = logged  # the name run_batch sends to the executor
    batch.dedicate_process()  # as the litmus-replay command does
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        summary = batch.run_batch([CORPUS / "runs"], CORPUS / "worlds", Path(tmp) / "out", runtime=args.runtime,
                                  jobs=args.jobs, reports=args.reports)
        ended = time.perf_counter()
        chunks = sorted((float(start), float(end), int(pid), int(runs))
                        for pid, start, end, runs in (line.split() for line in LOG.read_text().splitlines()))
    LOG.unlink()
    LOG.parent.rmdir()
    first, last = chunks[0][0], max(end for _, end, _, _ in chunks)
    print(f"# batch_timeline.py --runtime {args.runtime} --jobs {args.jobs} --reports {args.reports}; "
          f"{summary['runs']} runs; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    print(f"import the command line           {IMPORTED - STARTED:6.2f} s")
    print(f"batch start to first chunk        {first - began:6.2f} s")
    print(f"first chunk start to last end     {last - first:6.2f} s  ({len(chunks)} chunks)")
    print(f"last chunk end to batch end       {ended - last:6.2f} s")
    for pid in sorted({pid for _, _, pid, _ in chunks}):
        mine = [(start, end) for start, end, who, _ in chunks if who == pid]
        busy = sum(end - start for start, end in mine)
        print(f"worker {pid:<8} busy {busy:6.2f} s of {last - first:.2f} s ({busy / (last - first):4.0%}), "
              f"{len(mine)} chunks, first {mine[0][1] - mine[0][0]:.2f} s")
    if args.chunks:
        for start, end, pid, runs in chunks:
            print(f"  {pid:<8} {start - began:6.2f} {end - began:6.2f}  {runs} runs")


if __name__ == "__main__":
    main()
