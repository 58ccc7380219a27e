"""Nothing outlives a killed litmus-replay process: after SIGTERM or SIGKILL of ``run``, of the
``revalidate`` coordinator alone (as an OOM kill would be) or of one of its pool workers, every process
it had (launchers, env servers, the command a world was running) ends, and what a SIGKILL leaves behind
— a container, a temporary directory — the next run removes.

Each case runs a command that sleeps far longer than the test waits for anything (its duration, unique
to the case, is its mark among the host's processes), kills its target while the command runs, and
counts: the processes the target's tree held just before the kill and the marked commands (they must
end), then, after one more runtime has been opened and closed (the next run), the containers labelled
with a socket directory in the case's own temporary directory and the directories left there.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
import yaml

from litmus_replay.envs.runtimes import memory_cgroup
from litmus_replay.envs.runtimes.owner import owner_of

PATTERNS = ("litmus-sandbox-*", "litmus-env-*", "litmus-world-*", "litmus-docker-*")
SLEEP = 100  # s: the marked command; the shell allows it 120 s
PATIENCE = 60.0  # s; only a bound on the test's waiting, never a figure it asserts
RUNS = 6


def _stat(pid: int) -> tuple[int, str, str] | None:
    """(parent pid, state, start time) of a process; None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()
    return int(fields[1]), fields[0], fields[19]


def _processes() -> dict[int, tuple[int, str, str]]:
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            stat = _stat(int(entry.name))
            if stat is not None:
                found[int(entry.name)] = stat
    return found


def _tree(root: int) -> set[tuple[int, str]]:
    """(pid, start time) of ``root`` and every descendant it has now."""
    table = _processes()
    tree, frontier = set(), [root]
    while frontier:
        pid = frontier.pop()
        if pid in table:
            tree.add((pid, table[pid][2]))
            frontier.extend(child for child, (parent, _, _) in table.items() if parent == pid)
    return tree


def _living(processes: set[tuple[int, str]]) -> set[tuple[int, str]]:
    """Those still running (a zombie has ended; its parent just has not read its status yet)."""
    living = set()
    for pid, start in processes:
        stat = _stat(pid)
        if stat is not None and stat[2] == start and stat[1] != "Z":
            living.add((pid, start))
    return living


def _described(processes: set[tuple[int, str]]) -> list[str]:
    """Each process's pid, state and command line, to say which outlived its parent."""
    out = []
    for pid, _ in sorted(processes):
        stat = _stat(pid)
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            argv = "?"
        out.append(f"{pid} {stat[1] if stat else '-'} parent {stat[0] if stat else '-'}: {argv[:200]}")
    return out


def _marked(mark: str) -> list[int]:
    """Host pids of the marked command (a container's processes are the host's too)."""
    pids = []
    for entry in Path("/proc").iterdir():
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[:2] == [b"sleep", mark.encode()] and (_stat(int(entry.name)) or (0, "Z"))[1] != "Z":
            pids.append(int(entry.name))
    return pids


def _forks(pid: int) -> list[int]:
    """``pid`` and its children forked without exec (a batch's pool workers): the processes that start
    sandboxes and containers."""
    def argv(p: int) -> bytes | None:
        try:
            return Path(f"/proc/{p}/cmdline").read_bytes()
        except OSError:
            return None

    own = argv(pid)
    return [pid] + [child for child, (parent, _, _) in _processes().items() if parent == pid and argv(child) == own]


def _kill_held(victim: int, root: int, signum: int) -> set[tuple[int, str]]:
    """Send ``signum`` to ``victim``; return ``victim``'s tree as it was. The batch's own processes are
    stopped meanwhile, so none starts another worker, sandbox or container between the count and the kill."""
    frozen = _forks(root)
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    _wait_for(lambda: all((_stat(pid) or (0, "T"))[1] in "TtZX" for pid in frozen), "the batch to stop")
    held = _tree(victim)
    os.kill(victim, signum)
    for pid in frozen:
        try:
            os.kill(pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    return held


def _wait_for(condition, what: str):
    deadline = time.monotonic() + PATIENCE
    while not (value := condition()):
        if time.monotonic() > deadline:
            pytest.fail(f"waited {PATIENCE:g} s for {what}")
        time.sleep(0.2)
    return value


def _containers(tmp: Path) -> list[tuple[str, str]]:
    """(name, owner pid) of labelled containers whose socket directory lies in ``tmp``."""
    from litmus_replay.envs.runtimes.docker import LABEL, OWNER, Engine
    from litmus_replay.envs.runtimes.docker.engine import SOCKDIR

    engine = Engine.connect(timeout=10)
    try:
        return sorted((c.name, str(c.labels.get(OWNER))) for c in engine.labelled(**{LABEL: ""})
                      if str(c.labels.get(SOCKDIR, "")).startswith(f"{tmp}/"))
    finally:
        engine.close()


def _case(root: Path, mark: str) -> tuple[Path, Path, Path]:
    """A scenario whose one command sleeps (for ``run``), and its world and runs (for ``revalidate``)."""
    world = {"principals": ["alice"], "shell": {"timeout": SLEEP + 20, "max_timeout": SLEEP + 20}}
    trajectory = {"id": "sleeper", "principal": "alice", "task": "sleeper",
                  "turns": [{"calls": [{"tool": "run_command", "arguments": {"command": f"sleep {mark}; echo done"}}]}]}
    scenario = root / "sleeper.yaml"
    scenario.write_text(yaml.safe_dump({"format_version": 1, "name": "sleeper", "world": world,
                                        "policy": {"rules": []}, "trajectory": trajectory}))
    worlds, runs = root / "worlds", root / "runs"
    worlds.mkdir()
    runs.mkdir()
    (worlds / "sleeper.yaml").write_text(yaml.safe_dump({"name": "sleeper", "world": world, "policy": {"rules": []}}))
    (runs / "runs.jsonl").write_text("".join(json.dumps({**trajectory, "id": f"sleeper-{n}"}) + "\n" for n in range(RUNS)))
    return scenario, worlds, runs


def _worker_running(coordinator: int, mark: str, runtime: str, tmp: Path) -> int | None:
    """The pid of a pool worker whose world is running the marked command."""
    table = _processes()
    if runtime == "docker":  # the container's owner, whose processes are the engine's children
        from litmus_replay.envs.runtimes.docker import LABEL, OWNER, Engine
        from litmus_replay.envs.runtimes.docker.engine import SOCKDIR

        engine = Engine.connect(timeout=10)
        try:
            for container in engine.labelled(**{LABEL: ""}):
                owner = str(container.labels.get(OWNER, ""))
                if (str(container.labels.get(SOCKDIR, "")).startswith(f"{tmp}/") and owner.isdigit()
                        and table.get(int(owner), (0,))[0] == coordinator
                        and any(mark in " ".join(row) for row in container.top().get("Processes") or [])):
                    return int(owner)
        finally:
            engine.close()
        return None
    for pid in _marked(mark):
        while pid in table and table[pid][0] != coordinator:
            pid = table[pid][0]
        if pid in table:
            return pid
    return None


@pytest.mark.parametrize("target", ["run", "coordinator", "worker"])
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL], ids=["SIGTERM", "SIGKILL"])
def test_nothing_outlives_a_killed_process(isolated_runtime, tmp_path, target, signum):
    name = isolated_runtime.name
    mark = f"{SLEEP}.{random.randrange(10**8):08d}"
    scenario, worlds, runs = _case(tmp_path, mark)
    tmp = Path(tempfile.mkdtemp(prefix="killed-exit-"))  # beside /tmp's own: the sandbox reaches it as it does /tmp
    os.chmod(tmp, 0o755)
    env = {**os.environ, "TMPDIR": str(tmp)}
    if target == "run":
        argv = [sys.executable, "-m", "litmus_replay.replay", "run", str(scenario), "--runtime", name]
    else:
        argv = [sys.executable, "-m", "litmus_replay.replay", "revalidate", str(runs), "--worlds", str(worlds),
                "--out", str(tmp_path / "out"), "--runtime", name, "--jobs", "2", "--no-reports"]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait_for(lambda: _marked(mark) or process.poll() is not None, "the marked command to start")
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        victim = process.pid
        if target == "worker":
            victim = _wait_for(lambda: _worker_running(process.pid, mark, name, tmp), "a worker running the command")
        held = _kill_held(victim, process.pid, signum)
        killed = set(held)
        if name == "sandbox":
            assert len(held) > 1  # its launchers and servers
        if target == "worker":  # the batch goes on without it; the killed worker's processes end
            _wait_for(lambda: not _living(held), f"the killed worker's processes to end: {_living(held)}")
            if name == "docker":  # the next worker's runtime reaps what a SIGKILLed one left
                _wait_for(lambda: not [c for c, owner in _containers(tmp) if owner == str(victim)],
                          "the killed worker's containers to be removed")
            held = _kill_held(process.pid, process.pid, signal.SIGKILL)
            killed |= held
        process.wait(timeout=PATIENCE)
        try:
            _wait_for(lambda: not _living(held), "every process of the killed tree to end")
        except pytest.fail.Exception:  # say which outlived it: a pool worker, a launcher, a server
            pytest.fail(f"still running {PATIENCE:g} s after the kill: {_described(_living(held))}")
        _wait_for(lambda: not _marked(mark), "the marked command to end")
        # the next run reaps what a SIGKILL left
        subprocess.run([sys.executable, "-c", "import sys; from litmus_replay.envs.runtime import get_runtime; "
                        "get_runtime(sys.argv[1]).close()", name], env=env, check=True, timeout=PATIENCE)
        if name == "docker":
            assert _containers(tmp) == [], "containers outlived the killed process and the next run"
        left = sorted(path.name for pattern in PATTERNS for path in tmp.glob(pattern))
        assert left == [], f"temporary directories outlived the killed process and the next run: {left}"
        parent, _ = memory_cgroup.find()
        if parent is not None:  # the sandboxes' memory cgroups of the killed processes
            pids = {pid for pid, _ in killed}
            groups = [path.name for path in parent.path.glob(f"{memory_cgroup.PREFIX}*")
                      if (owner_of(path, memory_cgroup.PREFIX, parent.path) or (0,))[0] in pids]
            assert groups == [], f"memory cgroups outlived the killed process and the next run: {groups}"
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for pid in _marked(mark):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(tmp, ignore_errors=True)
