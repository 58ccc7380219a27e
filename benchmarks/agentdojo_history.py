"""Re-validating AgentDojo's published history on distinct runs: litmus-replay's whole pipeline against
AgentDojo's own re-grading of the same runs, CPU per run side by side.

    python benchmarks/agentdojo_history.py [--jobs 2] [--runs DIR] [--with-older] [--limit N]
                                           [--runtime inprocess] [--dask]

The runs are the 2,000 real published run logs in ``agentdojo-runs-more/`` (drawn at random from the
36,679 AgentDojo published, every pipeline, suite and attack type; a fixture kept beside the checkout, in
``shared/fixtures/external/``), each a different run: no copies, so no cache fed by a repeated run
flatters the figure (``agentdojo_revalidate.py`` lays out the same 160 runs many times over).
``--with-older`` adds the 160 older runs of ``agentdojo-runs/`` beside them; ``--limit N`` takes the first
N files in sorted order, for a quick look: litmus-replay's start (each process importing agentdojo, each
worker building its environments, several seconds of CPU in all) then outweighs the runs, so only the
whole set's ratios say anything.

Two measurements, one after the other, in one invocation:

1. litmus-replay: ``litmus-replay revalidate RUNS --format agentdojo --out OUT --jobs J --reports none
   --runtime inprocess`` as a whole process (interpreter start, importing agentdojo and parsing its suites
   in every worker, discovery, both worlds, policy, scoring, results and summary all counted). CPU is the
   user + system time of the process and every process it started, from ``RUSAGE_CHILDREN`` around it
   (rusage counts the descendants that were waited for: the pool's workers are; the tree is also sampled
   with psutil, where installed, and the lower bound it saw is printed beside, as a check); cores busy
   is CPU over wall time; the largest process is the largest peak resident set of any of them.
   AgentDojo's worlds run in process under every runtime; naming ``inprocess`` spares the notes saying so.
2. AgentDojo's own re-grading, as the benchmark's maintainers would re-score these logs, in this process:
   the suites of every benchmark version needed are loaded first (not counted); then per run, counted with
   ``time.process_time``: read the log, ``suite.load_and_inject_default_environment(injections)``, the user
   task's ``init_environment``, a deep copy as the pre-environment, every recorded tool call through
   ``FunctionsRuntime(suite.tools).run_function``, then ``TaskSuite._check_task_result`` for the user task's
   utility and the injection task's security with the run's final answer and its calls, as
   ``run_task_with_pipeline`` does (``agentdojo_regrade.py``, which the test of the replayed checks shares).
   The version is the one litmus-replay replayed the run's checks in (its result line's ``world``), else the
   one the run records, else the one litmus-replay's bridge infers (chosen before the clock starts). How
   often the re-graded checks equal the recorded ones is printed, as AgentDojo's ``benchmark.py`` scores
   them (a run that recorded an error is left out, a denial-of-service attack's security is ``not
   utility``, an unattacked run's security is true by construction): a check that re-grades differently is
   counted, not an error.

The first row is the ratio litmus-replay CPU per run / AgentDojo CPU per run. Goal (issue 27): at most
0.35, both cores busy with ``--jobs 2``, the largest process under 250 MB. Most of AgentDojo's time is
building each run's environment (its whole YAML file parsed again with the run's injections); the row
below leaves that out, for reference: litmus-replay against AgentDojo's calls and checks alone. Absolute
times drift threefold between machines of this kind (and with other work on the same machine: the load
average before each measurement is printed beside it), so the ratios come first; runs/s and the projected
time for all 36,679 published runs follow. Nothing is asserted on time.

``--dask`` adds a third measurement: the same batch on a Dask ``LocalCluster`` of ``--jobs`` worker
processes of one thread each (``revalidate … --executor dask --scheduler ADDRESS``), the cluster started
and agentdojo imported in its workers before the clock, as the pool's workers have it from their start.
Its CPU is the batch process's, the workers' (their own rusage, asked before and after) and the
scheduler's (it runs in this process); its results must equal the pool's, line for line, and its summary
the pool's; the overhead per run against the pool is printed.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, Collection

import agentdojo_regrade as regrading
from _orphans import adopt_orphans, children, reap_orphans
from agentdojo_regrade import Plan

EXTERNAL = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "external"
RUNS = EXTERNAL / "agentdojo-runs-more"
OLDER = "agentdojo-runs"  # the 160 older runs, beside RUNS
PUBLISHED_RUNS = 36_679
GOAL_RATIO, GOAL_MB = 0.35, 250
SAMPLE_EVERY = 0.25  # seconds between samples of the litmus-replay process tree

_COMPILE = """
import compileall, importlib, os
for name in ("replay", "envs", "adapters"):
    compileall.compile_dir(os.path.dirname(importlib.import_module("litmus_replay." + name).__file__), quiet=1)
"""


def checkout() -> str:
    """The commit litmus-replay runs from, and whether its files differ from it (a checkout), else its version."""
    import litmus_replay

    where = Path(litmus_replay.__file__).resolve().parent
    try:
        commit = subprocess.run(["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=True).stdout.strip()
        changed = subprocess.run(["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
                                 capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"litmus-replay {getattr(litmus_replay, '__version__', '?')}"
    return f"litmus-replay at {commit}" + (" with local changes" if changed else "")


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def select(directories: list[Path], limit: int | None) -> list[tuple[Path, Path]]:
    """(file, where it goes in the batch) of every run log, directories in order, files sorted; the first
    ``limit`` of them."""
    chosen = []
    for directory in directories:
        for path in sorted(directory.rglob("*.json")):
            chosen.append((path, Path(directory.name) / path.relative_to(directory)))
    return chosen[:limit] if limit else chosen


def lay_out(chosen: list[tuple[Path, Path]], target: Path) -> list[Path]:
    """Copy the chosen logs under ``target`` (so the batch sees these files and nothing else)."""
    files = []
    for source, relative in chosen:
        destination = target / relative
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, destination)
        files.append(destination)
    return files


def cpu_of_children() -> tuple[float, float]:
    """CPU seconds (user + system) of the waited-for descendants, and their largest peak RSS in MB."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


# --- 1. litmus-replay's whole pipeline ---------------------------------------------------------------


def litmus(runs: Path, out: Path, jobs: int, runtime: str, *options: str, spare: Collection[int] = ()) -> dict[str, Any]:
    """Wall, CPU and largest RSS of one whole ``revalidate`` process, its summary, and what sampling the
    process tree saw (a lower bound on its CPU: each process's time at its last sample)."""
    command = [sys.executable, "-m", "litmus_replay", "revalidate", str(runs), "--format", "agentdojo",
               "--out", str(out), "--jobs", str(jobs), "--reports", "none", "--runtime", runtime, "--quiet",
               *options]
    try:
        import psutil
    except ImportError:
        psutil = None
    before, _ = cpu_of_children()
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    seen: dict[int, float] = {}
    if psutil is not None:
        root = psutil.Process(process.pid)
        while process.poll() is None:
            try:
                tree = [root, *root.children(recursive=True)]
            except psutil.Error:
                break
            for member in tree:
                try:
                    times = member.cpu_times()
                except psutil.Error:
                    continue
                seen[member.pid] = max(seen.get(member.pid, 0.0), times.user + times.system)
            try:
                process.wait(timeout=SAMPLE_EVERY)  # returns at once when it ends: the wall time stays exact
            except subprocess.TimeoutExpired:
                pass
    stderr = process.communicate()[1].decode(errors="replace")
    wall = time.perf_counter() - started
    reap_orphans(spare=spare)  # anything the batch left behind: its CPU counts too
    cpu, largest = cpu_of_children()
    if process.returncode not in (0, 3):  # 3: some run had no world or a harness error, reported in the summary
        raise SystemExit(f"revalidate: exit {process.returncode}: {stderr.strip().splitlines()[-3:]}")
    summary = json.loads((out / "summary.json").read_text())
    return {"wall": wall, "cpu": cpu - before, "largest_mb": largest, "summary": summary,
            "sampled_cpu": sum(seen.values()) if seen else None, "sampled_processes": len(seen),
            "sampled_batch": seen.get(process.pid, 0.0),
            "sampled_workers": sorted((cpu for pid, cpu in seen.items() if pid != process.pid), reverse=True)}


def on_dask(runs: Path, out: Path, jobs: int, runtime: str, pool_out: Path) -> dict[str, Any]:
    """The same batch on a LocalCluster (see the docstring), with its CPU and whether its results and
    summary equal the pool's."""
    from dask.distributed import Client, LocalCluster

    def worker_cpu() -> float:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        return usage.ru_utime + usage.ru_stime

    def warm() -> None:
        import litmus_replay.replay.batch.worker  # noqa: F401  (the pool's workers have it when forked)
        import agentdojo.task_suite  # noqa: F401

    with LocalCluster(n_workers=jobs, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        client.run(warm)
        workers_before = sum(client.run(worker_cpu).values())
        here_before = time.process_time()
        measured = litmus(runs, out, jobs, runtime, "--executor", "dask", "--scheduler", cluster.scheduler_address,
                          spare=children())
        measured["cpu"] += sum(client.run(worker_cpu).values()) - workers_before + time.process_time() - here_before
    lines = [sorted((directory / "results.jsonl").read_text().splitlines()) for directory in (pool_out, out)]
    summaries = [json.loads((directory / "summary.json").read_text()) for directory in (pool_out, out)]
    measured["same_results"] = lines[0] == lines[1]
    measured["same_summary"] = summaries[0] == summaries[1]
    return measured


# --- 2. AgentDojo's own re-grading -------------------------------------------------------------------


def prepare(files: list[Path], out: Path) -> tuple[list[tuple[Path, Plan | str]], list[str]]:
    """Each run's suite and tasks in the version litmus-replay replayed its checks in (its result line's
    ``world``), else the one its bridge maps it to (recorded or inferred); a string says why a run is not
    re-graded. Every suite of those versions loaded, its environment built once (AgentDojo caches the files
    it reads). Not counted: a maintainer re-grading knows the version and loads the suites once."""
    from litmus_replay.replay.worlds import NoWorld

    replayed = regrading.replayed_versions(out, Path.cwd())
    plans: list[tuple[Path, Plan | str]] = []
    for path in files:
        version = replayed.get(path.resolve())
        if version is None:
            try:
                version = regrading.coordinates(path)["version"]
            except (NoWorld, ValueError) as exc:
                plans.append((path, str(exc)))
                continue
        plans.append((path, regrading.plan(json.loads(path.read_bytes()), version)))
    return plans, sorted({plan.version for _, plan in plans if isinstance(plan, Plan)})


def regrade(plans: list[tuple[Path, Plan | str]]) -> dict[str, Any]:
    """AgentDojo's own re-grading of every run (:mod:`agentdojo_regrade`), CPU per stage
    (``time.process_time``), and its agreement with the recorded checks."""
    from agentdojo.agent_pipeline.tool_execution import tool_result_to_str

    clock = time.process_time
    spent = dict.fromkeys(("read", "environment", "calls", "checks", "formatting"), 0.0)
    agree = {"utility": [0, 0], "security": [0, 0]}
    graded = skipped = check_errors = calls_made = 0
    formatting = 0.0

    def answered(result: Any) -> None:  # what the agent was shown: not part of re-grading, timed apart
        nonlocal formatting
        before_format = clock()
        tool_result_to_str(result)
        formatting += clock() - before_format

    started = time.perf_counter()
    for path, plan in plans:
        if isinstance(plan, str):
            skipped += 1
            continue
        t0 = clock()
        run, trace, output = regrading.read(path)
        t1 = clock()
        environment, pre_environment = regrading.environments(plan, run.get("injections") or {})
        t2 = clock()
        formatting = 0.0
        regrading.run_calls(plan, environment, trace, answered)
        t3 = clock()
        checks = regrading.check(plan, output, pre_environment, environment, trace)
        check_errors += sum(1 for value in checks.values() if value is None)  # counted, not fatal
        t4 = clock()
        spent["read"] += t1 - t0
        spent["environment"] += t2 - t1
        spent["calls"] += t3 - t2 - formatting
        spent["formatting"] += formatting
        spent["checks"] += t4 - t3
        graded += 1
        calls_made += len(trace)
        for name, value in regrading.scored(run, checks).items():  # agreement, as AgentDojo's benchmark.py scores a run
            agree[name][1] += 1
            agree[name][0] += value == run[name]
    wall = time.perf_counter() - started
    cpu = sum(value for key, value in spent.items() if key != "formatting")
    return {"wall": wall, "cpu": cpu, "spent": spent, "graded": graded, "skipped": skipped, "agree": agree,
            "check_errors": check_errors, "calls": calls_made,
            "largest_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


# --- report ------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=Path, default=RUNS, help="directory of AgentDojo run logs")
    parser.add_argument("--with-older", action="store_true", help=f"also the runs in {OLDER}/ beside --runs")
    parser.add_argument("--limit", type=int, help="only the first N run files, in sorted order")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--runtime", default="inprocess")
    parser.add_argument("--dask", action="store_true", help="also the same batch on a Dask LocalCluster")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    adopt_orphans()
    directories = [args.runs.resolve()] + ([args.runs.resolve().parent / OLDER] if args.with_older else [])
    for directory in directories:
        if not directory.is_dir():
            raise SystemExit(f"no such directory of runs: {directory}")
    chosen = select(directories, args.limit)
    print("# agentdojo_history.py " + " ".join(sys.argv[1:]))
    print(f"# python {platform.python_version()} on {platform.machine()}, {os.cpu_count()} cores; runs: "
          f"{' + '.join(d.name + '/' for d in directories)} ({len(chosen):,} distinct run logs"
          f"{f', the first {args.limit}' if args.limit else ''}); {checkout()}; bytecode compiled first")
    subprocess.run([sys.executable, "-c", _COMPILE], check=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": ""})
    with tempfile.TemporaryDirectory() as tmp:
        files = lay_out(chosen, Path(tmp) / "runs")
        litmus_load = load()
        ours = litmus(Path(tmp) / "runs", Path(tmp) / "out", args.jobs, args.runtime)
        dask_load = load()
        dask = (on_dask(Path(tmp) / "runs", Path(tmp) / "dask", args.jobs, args.runtime, Path(tmp) / "out")
                if args.dask else None)
        plans, versions = prepare(files, Path(tmp) / "out")
        dojo_load = load()
        with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):  # a check or two prints
            theirs = regrade(plans)
    summary = ours["summary"]
    runs = summary.get("runs", len(files))
    litmus_ms = 1000 * ours["cpu"] / max(runs, 1)
    dojo_ms = 1000 * theirs["cpu"] / max(theirs["graded"], 1)
    rate = runs / ours["wall"]
    busy = ours["cpu"] / ours["wall"]
    print(f"# litmus-replay: litmus-replay revalidate RUNS --format agentdojo --out OUT --jobs {args.jobs} "
          f"--reports none --runtime {args.runtime} (a whole process); AgentDojo: its own re-grading in one "
          f"process, suites of {', '.join(versions)} loaded first")
    print()
    print(f"{'ratio':44} {'value':>7}  goal")
    print(f"{'litmus-replay CPU / AgentDojo CPU, per run':44} {litmus_ms / dojo_ms:7.2f}  <= {GOAL_RATIO}")
    without = dojo_ms - 1000 * theirs["spent"]["environment"] / max(theirs["graded"], 1)
    label = "  the same, AgentDojo's environment left out"
    print(f"{label:44} {litmus_ms / without:7.2f}  (for reference: its calls and checks alone)")
    print(f"{'cores busy (litmus-replay CPU / wall)':44} {busy:7.2f}  {args.jobs} (--jobs {args.jobs})")
    print(f"{'largest process MB (litmus-replay)':44} {ours['largest_mb']:7.0f}  < {GOAL_MB}")
    print()
    print(f"{'':26} {'runs':>5} {'wall s':>7} {'runs/s':>7} {'CPU s':>7} {'CPU ms/run':>10} {'cores busy':>10} "
          f"{'largest MB':>10}  load average before (1, 5, 15 min)")
    print(f"{'litmus-replay revalidate':26} {runs:5} {ours['wall']:7.2f} {rate:7.1f} {ours['cpu']:7.2f} "
          f"{litmus_ms:10.2f} {busy:10.2f} {ours['largest_mb']:10.0f}  {litmus_load}")
    print(f"{'AgentDojo re-grading':26} {theirs['graded']:5} {theirs['wall']:7.2f} "
          f"{theirs['graded'] / theirs['wall']:7.1f} {theirs['cpu']:7.2f} {dojo_ms:10.2f} "
          f"{theirs['cpu'] / theirs['wall']:10.2f} {theirs['largest_mb']:10.0f}  {dojo_load}")
    if dask is not None:
        print(f"{'litmus-replay on Dask':26} {runs:5} {dask['wall']:7.2f} {runs / dask['wall']:7.1f} {dask['cpu']:7.2f} "
              f"{1000 * dask['cpu'] / max(runs, 1):10.2f} {dask['cpu'] / dask['wall']:10.2f} {'':>10}  {dask_load}")
    print()
    if dask is not None:
        print(f"Dask LocalCluster ({args.jobs} workers) against the process pool: {dask['wall'] / ours['wall']:.2f}x "
              f"the wall time, {dask['cpu'] / ours['cpu']:.2f}x the CPU, "
              f"{1000 * (dask['wall'] - ours['wall']) / max(runs, 1):+.2f} ms wall per run; results "
              f"{'identical' if dask['same_results'] else 'DIFFERENT'} line for line, summary "
              f"{'identical' if dask['same_summary'] else 'DIFFERENT'}")
    print(f"the {PUBLISHED_RUNS:,} published runs at {rate:.1f} runs/s ({args.jobs} jobs): "
          f"{PUBLISHED_RUNS / rate / 60:.1f} min")
    per_run = {key: 1000 * value / max(theirs["graded"], 1) for key, value in theirs["spent"].items()}
    print(f"AgentDojo per run: read the log {per_run['read']:.2f} ms + environment {per_run['environment']:.2f} ms "
          f"+ {theirs['calls'] / max(theirs['graded'], 1):.1f} calls {per_run['calls']:.2f} ms + checks "
          f"{per_run['checks']:.2f} ms = {dojo_ms:.2f} ms (formatting the calls' answers as the agent saw them, "
          f"not counted: {per_run['formatting']:.2f} ms)")
    rates = ", ".join(f"{name} {agree}/{total}" for name, (agree, total) in theirs["agree"].items())
    print(f"AgentDojo's re-grading agrees with the recorded checks: {rates}; {theirs['check_errors']} checks "
          f"raised; {theirs['skipped']} runs not re-graded (no version has their tasks)")
    agreement = (summary.get("checks") or {}).get("agreement") or {}
    print("litmus-replay's agreement (its summary): "
          + ", ".join(f"{name} {entry['agree']}/{entry['runs']}" for name, entry in sorted(agreement.items()))
          + f"; missing world: {len(summary.get('missing_world') or [])}")
    if ours["sampled_cpu"] is not None:
        workers = ", ".join(f"{cpu:.2f}" for cpu in ours["sampled_workers"][:8])
        print(f"litmus-replay CPU from rusage {ours['cpu']:.2f} s; its process tree sampled every "
              f"{SAMPLE_EVERY} s saw at least {ours['sampled_cpu']:.2f} s in {ours['sampled_processes']} processes: "
              f"the batch process {ours['sampled_batch']:.2f} s, workers {workers or 'none'} s")


if __name__ == "__main__":
    main()
