"""The sandbox as root and as an ordinary user, side by side: world-open cost and round trips per id mapping.

    python benchmarks/sandbox_rootless.py [--calls 300] [--worlds 10] [--user NAME]

Rows: ``host-range`` (run as root), ``subordinate`` (an ordinary account with subordinate ids: two
``newuidmap``/``newgidmap`` runs per sandbox) and ``single-uid`` (the same account mapping only its own
uid; the files domain checks permissions itself). Each row is measured in a child process running as that
account: the runtime's start (one probe sandbox), a world opened cold (a fresh sandbox, ``warm=False``),
a world opened on a sandbox reused from the last clean world, and the medians of a ``read_file`` and a
``run_command 'true'`` round trip. Run as root; without ``--user`` it makes a temporary account with a
subordinate range (and an ACL entry on each directory above the checkout and the Python installation
that others cannot search), and removes both afterwards.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import stat
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WORLD = {"principals": ["alice", "bob"], "shell": {},
         "files": {"tree": {"/workspace/a.txt": "hello\n",
                            "/home/bob/key": {"content": "k\n", "owner": "bob", "mode": "0600"}}}}
READ = {"tool": "read_file", "params": {"path": "/workspace/a.txt"}, "principal": "alice"}
SHELL = {"tool": "run_command", "params": {"command": "true"}, "principal": "alice"}
BENCH_USER = "litmus-bench"
BENCH_RANGE = (1_500_000_000, 65536)


def _median_ms(times: list[float]) -> float:
    return 1000 * statistics.median(times)


def measure(mode: str, calls: int, worlds: int) -> dict[str, float | str]:
    """One row, in this process (as whoever runs it)."""
    from litmus_replay.envs.runtime import get_runtime

    started = time.perf_counter()
    cold = get_runtime("sandbox", id_mapping=mode, warm=False, reuse=0)
    start_ms = 1000 * (time.perf_counter() - started)
    assert cold.id_mapping == mode, cold.id_mapping
    try:
        opens = []
        for _ in range(worlds):
            started = time.perf_counter()
            cold.open_world(WORLD, "real").close()
            opens.append(time.perf_counter() - started)
    finally:
        cold.close()
    warm = get_runtime("sandbox", id_mapping=mode)
    try:
        warm.open_world(WORLD, "real").close()
        reused = []
        for _ in range(worlds):
            started = time.perf_counter()
            handle = warm.open_world(WORLD, "real")
            reused.append(time.perf_counter() - started)
            handle.close()
        handle = warm.open_world(WORLD, "real")
        try:
            reads, shells = [], []
            for _ in range(calls):
                started = time.perf_counter()
                handle.call(READ)
                reads.append(time.perf_counter() - started)
            for _ in range(max(calls // 10, 10)):
                started = time.perf_counter()
                handle.call(SHELL)
                shells.append(time.perf_counter() - started)
        finally:
            handle.close()
    finally:
        warm.close()
    return {"mode": mode, "backend": warm.backend, "start_ms": start_ms, "cold_ms": _median_ms(opens),
            "reused_ms": _median_ms(reused), "read_us": 1000 * _median_ms(reads), "shell_ms": _median_ms(shells)}


def _child(mode: str, user: str | None, args: argparse.Namespace) -> dict[str, float | str]:
    argv = [sys.executable, __file__, "--measure", mode, "--calls", str(args.calls), "--worlds", str(args.worlds)]
    cwd = None
    if user is not None:
        cwd = tempfile.mkdtemp(prefix="litmus-bench-")
        shutil.chown(cwd, user)
        argv = ["runuser", "-u", user, "--", "env", "-i", f"PATH={os.environ.get('PATH', '/usr/bin:/bin')}",
                f"HOME={cwd}", "PYTHONDONTWRITEBYTECODE=1", *argv]
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False)
    finally:
        if cwd:
            shutil.rmtree(cwd, ignore_errors=True)
    if done.returncode != 0:
        sys.exit(f"measuring {mode} as {user or 'root'} failed: {done.stderr.strip()[-800:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _unsearchable_dirs() -> list[Path]:
    tops = {Path(os.path.realpath(sys.executable)).parent, Path(sys.prefix), ROOT}
    return sorted({p for top in tops for p in Path(os.path.realpath(top)).parents
                   if not os.stat(p).st_mode & stat.S_IXOTH})


def _make_user() -> list[list[str]]:
    """A temporary ordinary account with a subordinate range; returns the commands that undo it."""
    start, count = BENCH_RANGE
    span = f"{start}-{start + count - 1}"
    subprocess.run(["useradd", "--system", "--no-create-home", "--user-group", "--shell", "/bin/sh", BENCH_USER],
                   check=True)
    undo = [["userdel", BENCH_USER], ["usermod", "--del-subuids", span, "--del-subgids", span, BENCH_USER]]
    subprocess.run(["usermod", "--add-subuids", span, "--add-subgids", span, BENCH_USER], check=True)
    for directory in _unsearchable_dirs():
        subprocess.run(["setfacl", "-m", f"u:{BENCH_USER}:x", str(directory)], check=True)
        undo.insert(0, ["setfacl", "-x", f"u:{BENCH_USER}", str(directory)])
    return undo


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--worlds", type=int, default=10)
    parser.add_argument("--user", help="an ordinary account with subordinate ids (default: a temporary one)")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure, args.calls, args.worlds)))
        return
    if os.geteuid() != 0:
        sys.exit("run as root: it measures root's sandbox and an ordinary account's side by side")
    undo = [] if args.user else _make_user()
    user = args.user or BENCH_USER
    try:
        rows = [_child("host-range", None, args), _child("subordinate", user, args), _child("single-uid", user, args)]
    finally:
        for command in undo:
            subprocess.run(command, capture_output=True)
    print(f"# sandbox_rootless.py --calls {args.calls} --worlds {args.worlds}")
    print(f"# python {platform.python_version()} on {platform.machine()}, medians; backend {rows[0]['backend']}")
    print(f"{'id mapping':<13}{'run as':<14}{'start ms':>9}{'open cold ms':>14}{'open reused ms':>16}"
          f"{'read_file µs':>14}{'run_command ms':>16}")
    for row in rows:
        who = "root" if row["mode"] == "host-range" else "ordinary user"
        print(f"{row['mode']:<13}{who:<14}{row['start_ms']:>9.0f}{row['cold_ms']:>14.0f}{row['reused_ms']:>16.1f}"
              f"{row['read_us']:>14.0f}{row['shell_ms']:>16.1f}")


if __name__ == "__main__":
    main()
