"""Each world's process limit is its own: a world holding many processes never makes another world's
``fork`` fail, in every isolated runtime — two worlds, the same principal (so, in docker, the same host
uid), at once. The holder is the hostile pack's ``process-limit-hold`` world and its first command."""

from __future__ import annotations

import os
import threading
from pathlib import Path

from litmus_replay.replay.scenario import load_scenario

PACK = load_scenario(Path(__file__).resolve().parents[2] / "scenarios" / "hostile" / "process-limit-hold.yaml")
HOLDER = PACK.spec.world
HOLD = next(call for _, call in PACK.trajectories[0].calls()).arguments["command"]
HELD = 60  # processes the holder holds: past the second world's own limit if the two shared one
MARK = "7.31"  # the holder's sleeps, told apart from anything else on the host by their argument
OTHER = {"principals": ["alice"], "shell": {"timeout": 12, "max_timeout": 12, "processes": 40}}
FORKS = "for i in $(seq 30); do /bin/true || exit 9; done; echo all forked"


def _run(handle, command: str, **params) -> dict:
    return handle.call({"tool": "run_command", "principal": "alice", "params": {"command": command, **params}})


def _held() -> int:
    """The holder's sleeps running on this machine (the runtimes' pid namespaces are visible from here)."""
    found = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                found += handle.read() == f"sleep\0{MARK}\0".encode()
        except OSError:
            continue
    return found


def test_the_holder_is_the_packs():
    assert f"seq {HELD}" in HOLD and f"sleep {MARK}" in HOLD and OTHER["shell"]["processes"] < HELD


def test_a_world_holding_many_processes_leaves_another_worlds_fork_alone(isolated_runtime):
    holder = isolated_runtime.open_world(HOLDER, "real")
    other = isolated_runtime.open_world(OTHER, "real")
    held: dict = {}
    thread = threading.Thread(target=lambda: held.update(_run(holder, HOLD)))
    try:
        thread.start()
        while _held() < HELD and thread.is_alive():
            threading.Event().wait(0.05)
        assert _held() >= HELD, f"the holder did not get its {HELD} processes: {held}"
        forks = _run(other, FORKS)
        assert (forks["status"], forks["output"]["stdout"]) == ("ok", "all forked\n"), forks
        assert "fork" not in forks["output"]["stderr"], forks
    finally:
        thread.join(timeout=30)
        holder.close()
        other.close()
    assert held["status"] == "ok", held
