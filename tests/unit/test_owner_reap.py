"""A killed run's temporary directories are removed by the next run, and only those: never a live
process's, never one whose name names no owner, and a zombie counts as ended."""

from __future__ import annotations

import os
import subprocess
import sys

from litmus_replay.envs.runtimes import owner


def _ended_process() -> tuple[int, str]:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    start = owner.start_time(child.pid)
    child.wait()
    return child.pid, start or "0"


def test_the_next_run_removes_only_a_dead_owners_directories(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(owner.tempfile, "tempdir", None)
    prefix = "litmus-sandbox-"
    pid, start = _ended_process()
    dead = tmp_path / f"{prefix}{pid}-{start}-abcd"
    recycled = tmp_path / f"{prefix}{os.getpid()}-1-abcd"  # this pid, another start time: its owner is gone
    live = tmp_path / f"{owner.owned_prefix(prefix)}abcd"
    legacy = tmp_path / f"{prefix}k2j4l5x0"  # names no owner: never taken for a dead run's
    for path in (dead, recycled, live, legacy):
        path.mkdir()
    removed = owner.reap_dirs(prefix, lambda path: path.rmdir())
    assert sorted(removed) == sorted([dead, recycled])
    assert live.exists() and legacy.exists() and not dead.exists()


def test_a_zombie_has_ended():
    child = os.fork()
    if child == 0:
        os._exit(0)
    try:
        while (owner._stat(child) or ["Z"])[0] != "Z":
            os.sched_yield()
        assert owner.start_time(child) is not None and not owner.alive(child, owner.start_time(child))
        assert owner.alive(os.getpid(), owner.start_time(os.getpid()))
    finally:
        os.waitpid(child, 0)
