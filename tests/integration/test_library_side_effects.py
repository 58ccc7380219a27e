"""A program that uses the library keeps its process as it was: replaying, re-validating a batch and opening
worlds in docker install no signal handler, no ``atexit`` hook and no environment variable. The command line
asks for the docker runtime's clean-up at exit and on SIGTERM (``clean_up_at_exit``), which a library caller
does with ``with get_runtime("docker") as runtime:``."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# In a fresh interpreter: the process's SIGTERM handler, atexit hooks and environment before and after
# using the library, as JSON.
PROGRAM = textwrap.dedent("""
    import atexit, json, os, signal, sys
    def state():
        return {"sigterm": repr(signal.getsignal(signal.SIGTERM)), "atexit": atexit._ncallbacks(),
                "environ": dict(os.environ)}
    from litmus_replay.envs.runtime import get_runtime
    from litmus_replay.replay import batch
    import concurrent.futures.process, multiprocessing.util, weakref  # what the batch uses registers its own hooks
    weakref.finalize(state, lambda: None)  # weakref's finalizers register their one exit hook on first use
    before = state()  # after importing: the standard library's modules register their hooks on import
    if sys.argv[1] == "cli":
        from litmus_replay.envs.runtimes.docker import clean_up_at_exit
        clean_up_at_exit()
    with get_runtime("docker") as runtime:
        world = runtime.open_world({"principals": ["alice"], "files": {"tree": {"/workspace/a.txt": "a"}}}, "real")
        world.call({"tool": "read_file", "principal": "alice", "params": {"path": "/workspace/a.txt"}})
        world.close()
        during = state()
    summary = batch.run_batch([sys.argv[2]], sys.argv[3], sys.argv[4], runtime="inprocess", reports="none",
                              benchmark_version="v1.2")
    print(json.dumps({"before": before, "during": during, "after": state(), "runs": summary["runs"]}))
""")


def _run(mode: str, tmp_path: Path) -> dict:
    runs, worlds = tmp_path / "runs", tmp_path / "worlds"
    runs.mkdir()
    worlds.mkdir()
    (worlds / "w.yaml").write_text("name: t\nworld: {principals: [alice], files: {tree: {/workspace/a.txt: a}}}\n")
    (runs / "r.jsonl").write_text(json.dumps({"format_version": 1, "id": "r", "task": "t", "principal": "alice", "turns": [
        {"calls": [{"tool": "read_file", "arguments": {"path": "/workspace/a.txt"}}]}]}) + "\n")
    done = subprocess.run([sys.executable, "-c", PROGRAM, mode, str(runs), str(worlds), str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_library_leaves_signals_exit_hooks_and_environment_alone(runtime_opener, tmp_path):
    runtime_opener("docker").close()  # a Docker engine answers (or the test skips, or fails where required)
    seen = _run("library", tmp_path)
    assert seen["runs"] == 1
    for moment in ("during", "after"):
        assert seen[moment]["sigterm"] == seen["before"]["sigterm"], moment
        assert seen[moment]["atexit"] == seen["before"]["atexit"], moment
        assert seen[moment]["environ"] == seen["before"]["environ"], moment


def test_the_command_line_asks_for_clean_up_at_exit_and_on_sigterm(runtime_opener, tmp_path):
    runtime_opener("docker").close()
    seen = _run("cli", tmp_path)
    assert seen["during"]["sigterm"] != seen["before"]["sigterm"]
    assert seen["during"]["atexit"] == seen["before"]["atexit"] + 1
