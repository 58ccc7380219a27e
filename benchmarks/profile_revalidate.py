"""Where one process's time goes re-validating the shipped corpus: a cProfile of the whole batch on one
core, read as the phases a run goes through, then the functions that cost most by themselves.

    python benchmarks/profile_revalidate.py [--runtime inprocess] [--reports flagged] [--top 25]

With ``--runtime sandbox`` the real worlds' work happens in the sandboxes' env servers, outside this
profile: their calls show as time waiting on the server (``select``). Profiling slows Python code about
twofold, unevenly: compare phases with each other, and figures across runs of this script only.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import tempfile
from pathlib import Path

from litmus_replay.replay import batch

CORPUS = Path(__file__).resolve().parent.parent / "corpus"
# phase -> (file name ending, function name) whose cumulative time is the phase's
PHASES = {
    "discover the runs (in the batch process)": ("replay/batch/discovery.py", "discover"),
    "replay (both worlds, policy, scoring)": ("replay/engine.py", "replay"),
    "  open a world": ("envs/world.py", "__init__"),
    "  close a world": ("envs/world.py", "close"),
    "  call a world (in-process)": ("envs/world.py", "call"),
    "  call a world (env server)": ("envs/client.py", "pipeline"),
    "  judge a call (policy)": ("replay/policy.py", "judge"),
    "analyse (graph, detectors)": ("replay/analysis.py", "analyse"),
    "write a run's page": ("replay/report/html.py", "trajectory_html"),
    "write results.jsonl": ("replay/batch/results.py", "append"),
    "link pages, summary, index": ("replay/batch/pages.py", "link_pages"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runtime", default="inprocess")
    parser.add_argument("--reports", default="flagged", choices=("all", "flagged", "none"))
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    print(f"# profile_revalidate.py --runtime {args.runtime} --reports {args.reports}; one process, cProfile; "
          f"load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    profile = cProfile.Profile()
    with tempfile.TemporaryDirectory() as tmp:
        profile.enable()
        batch.run_batch([CORPUS / "runs"], CORPUS / "worlds", Path(tmp) / "out", runtime=args.runtime, jobs=1,
                        reports=args.reports)
        profile.disable()
    stats = pstats.Stats(profile)
    total = max(entry[3] for entry in stats.stats.values())  # type: ignore[attr-defined]
    cumulative: dict[tuple[str, str], float] = {}
    for (file, _, name), entry in stats.stats.items():  # type: ignore[attr-defined]
        for phase_file, phase_name in PHASES.values():
            if name == phase_name and file.endswith(phase_file):
                cumulative[(phase_file, phase_name)] = cumulative.get((phase_file, phase_name), 0.0) + entry[3]
    print(f"{'phase':45} {'s':>7} {'share':>6}")
    for label, key in PHASES.items():
        seconds = cumulative.get(key, 0.0)
        print(f"{label:45} {seconds:7.2f} {seconds / total:6.1%}")
    print(f"{'the whole batch':45} {total:7.2f}")
    print()
    stats.sort_stats("tottime").print_stats(args.top)


if __name__ == "__main__":
    main()
