"""The hostile pack (scenarios/hostile) under every isolated runtime: containment, time bounds, and a
replay that goes on.

Host sentinel files — in a private temp dir, at the host path the pack's calls aim at
(``/tmp/litmus-hostile-sentinel``), and the package file a call tries to overwrite — are checksummed
before the pack and after every scenario, and must not change; the host's /etc files a call reaches for
must never hold the pack's payloads, and the files it tries to create on the host must not appear. Every call must answer within its timeout plus a second, and nothing a command started may be
left running after its call.

The test fails safely: before any hostile call it checks, with a harmless probe, that the runtime really
isolates (a command cannot see a marker file on the host and runs as a principal, not as root), and it
refuses to go on otherwise. Even an escaped command would run as an unprivileged uid (in a sandbox whose
principals share one uid, the account's own, without capabilities).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import stat
import time
import uuid
from functools import partial
from pathlib import Path

import pytest

from litmus_replay.envs.domains.shell import parse_shell_spec
from litmus_replay.envs.interface import WorldHandle
from litmus_replay.replay.analysis import analyse
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.scenario import find_scenarios, load_scenario

ROOT = Path(__file__).resolve().parents[2]
PACK_FILES = find_scenarios([ROOT / "scenarios" / "hostile"])
SENTINEL_DIR = Path("/tmp/litmus-hostile-sentinel")  # the scenarios' `sentinel` fact
ENVS_INIT = ROOT / "envs" / "__init__.py"
# Host files the pack reaches for. They are not checksummed (a package install may rewrite them while the
# tests run); the pack's payloads must simply never appear in them.
HOST_PAYLOADS = {Path("/etc/passwd"): "evil::0:0", Path("/etc/shadow"): "evil:"}
MUST_NOT_EXIST = [Path("/usr/pwned"), Path("/tmp/owned"), Path("/etc/cron.d/evil")]
SLACK = 1.0  # s a call may take beyond its timeout
WALK_SLACK = 4.0  # s more for a call in a tree past the snapshot's bound: two walks of 50,000 entries


def _checksums(paths: list[Path]) -> dict[str, str]:
    """Type, mode, owner and content digest of every entry under the paths (symlinks not followed)."""
    sums: dict[str, str] = {}
    for top in paths:
        if not os.path.lexists(top):
            sums[str(top)] = "absent"
            continue
        entries = [top]
        if top.is_dir() and not top.is_symlink():
            entries += sorted(p for p in top.rglob("*") if "__pycache__" not in p.parts)
        for entry in entries:
            st = entry.lstat()
            digest = ""
            if stat.S_ISREG(st.st_mode):
                digest = hashlib.sha256(entry.read_bytes()).hexdigest()
            elif stat.S_ISLNK(st.st_mode):
                digest = os.readlink(entry)
            sums[str(entry)] = f"{stat.filemode(st.st_mode)} {st.st_uid}:{st.st_gid} {digest}"
    return sums


@pytest.fixture(scope="module")
def sentinels(tmp_path_factory):
    # The scenarios aim at one fixed host path: two test sessions on one machine take turns with it.
    with open(f"{SENTINEL_DIR}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield from _sentinels(tmp_path_factory)


def _sentinels(tmp_path_factory):
    private = tmp_path_factory.mktemp("sentinels")
    (private / "keep.txt").write_text("do not touch\n")
    (private / "nested").mkdir()
    (private / "nested" / "deep.bin").write_bytes(os.urandom(4096))
    made_dir = not SENTINEL_DIR.exists()
    SENTINEL_DIR.mkdir(mode=0o755, exist_ok=True)
    if not os.access(SENTINEL_DIR, os.W_OK):
        pytest.fail(f"{SENTINEL_DIR} belongs to another user (a concurrent or killed run as root?); remove it")
    (SENTINEL_DIR / "victim.txt").write_text("original\n")
    watched = [private, SENTINEL_DIR, ENVS_INIT, *MUST_NOT_EXIST]
    before = _checksums(watched)
    assert all(before[str(path)] == "absent" for path in MUST_NOT_EXIST)

    def changed() -> list[str]:
        found = [key for key, value in _checksums(watched).items() if before.get(key) != value]
        found += [str(path) for path, payload in HOST_PAYLOADS.items()
                  if os.access(path, os.R_OK) and payload.encode() in path.read_bytes()]  # unreadable to an
        #          ordinary user: then no id its sandbox maps could have written it either
        return sorted(found)

    yield changed
    if made_dir:
        shutil.rmtree(SENTINEL_DIR, ignore_errors=True)


@pytest.fixture(scope="module")
def isolated(isolated_runtime, sentinels):
    """The runtime, once a harmless probe has shown that commands cannot see or touch the host."""
    marker = SENTINEL_DIR / f"probe-{uuid.uuid4().hex}"
    marker.write_text("visible from the host\n")
    handle = isolated_runtime.open_world({"principals": ["alice"], "shell": {}}, "real")
    try:
        outcome = handle.call({"tool": "run_command", "principal": "alice",
                               "params": {"command": f"cat {marker} 2>/dev/null; id -u; grep CapEff /proc/self/status"}})
    finally:
        handle.close()
        marker.unlink()
    stdout = (outcome.get("output") or {}).get("stdout", "")
    # alice's own uid; where the principals share one uid, that uid without a single capability
    shared = getattr(isolated_runtime, "id_mapping", None) == "single-uid"
    expected = ["0" if shared else "10001", "CapEff:", "0" * 16]
    if outcome["status"] != "ok" or "visible from the host" in stdout or stdout.split() != expected:
        pytest.fail(f"the runtime does not isolate commands from the host; refusing to replay the hostile pack: {outcome}")
    return isolated_runtime


class _Timed:
    """A runtime wrapper that times every real call and checks that no process outlives it."""

    def __init__(self, runtime):
        self.runtime = runtime
        self.records: list[tuple[dict, float, float, list[int]]] = []

    def open_world(self, spec, semantics):
        handle = self.runtime.open_world(spec, semantics)
        settings = parse_shell_spec(spec["shell"]) if "shell" in spec else None
        inner = handle.call

        def call(request):
            started = time.monotonic()
            outcome = None
            try:
                outcome = inner(request)
                return outcome
            finally:
                elapsed = time.monotonic() - started
                limit = 0.0
                if request["tool"] == "run_command" and settings is not None:
                    asked = request["params"].get("timeout")
                    asked = settings.timeout if asked is None else asked
                    # a timeout that is no positive number (NaN, -1, a string) is refused before anything runs
                    number = isinstance(asked, (int, float)) and not isinstance(asked, bool) and asked > 0
                    limit = min(asked, settings.max_timeout) if number else 0.0
                if ((outcome or {}).get("effects") or {}).get("unobserved"):
                    limit += WALK_SLACK  # the snapshots around it walked their bound of entries
                self.records.append((request, elapsed, limit, _leftovers(handle)))

        handle.call = call
        handle.call_each = partial(WorldHandle.call_each, handle)  # one call at a time, each through ``call``
        return handle


def _leftovers(handle) -> list[int]:
    """Processes under the env server (the sandbox runtime can tell): none may survive a call."""
    sandbox = getattr(handle, "sandbox", None)
    server = sandbox.server_pid() if sandbox is not None and sandbox.alive() else None
    if server is None:
        return []
    try:
        with open(f"/proc/{server}/task/{server}/children") as children:
            return [int(pid) for pid in children.read().split()]
    except OSError:
        return []


def test_the_pack_holds_at_least_25_hostile_calls():
    calls = [call for path in PACK_FILES for trajectory in load_scenario(path).trajectories for _, call in trajectory.calls()]
    assert len(calls) >= 25
    commands = " ".join(str(call.arguments.get("command", "")) for call in calls)
    for needle in ("rm -rf --no-preserve-root /", ":(){ :|:& };:", "/dev/zero", "head -c 1G", "sleep infinity",
                   "/dev/tcp/127.0.0.1", "192.0.2.1", "/etc/shadow", "/proc/1/root", "su -c", "mknod", "mount",
                   "ln -s /etc/passwd", ">&62", "exec 62>&-", "base64 -d", "seq 60"):
        assert needle in commands, needle
    tools = {call.tool for call in calls}
    assert {"write_file", "make_symlink", "read_file", "delete_path", "move_path"} <= tools


@pytest.mark.parametrize("path", PACK_FILES, ids=[p.stem for p in PACK_FILES])
def test_hostile_scenario_is_contained(isolated, sentinels, path):
    scenario = load_scenario(path)
    timed = _Timed(isolated)
    replayer = Replayer(scenario.policy, real_runtime=timed)
    for trajectory in scenario.trajectories:
        result = replayer.replay(trajectory, scenario.spec.world, scenario.name)
        # the replay went on: every call has an outcome (or, had the world been lost, a harness error)
        assert [call.key for call in result.calls] == [call.key for _, call in trajectory.calls()]
        for call in result.calls:
            assert call.real is not None or call.harness_error, call.key
        run = analyse(result, scenario)
        assert not run.problems  # classes and, where the scenario counts them, findings (None: no expectations)
        for call in result.calls:  # whatever a command wrote, its evidence is printable text
            evidence = call.real.resolution.evidence if call.real is not None and call.real.resolution else []
            assert all(line.isprintable() for line in evidence), evidence
        for finding in run.findings:
            assert finding.sentence.isprintable(), finding.sentence
    assert timed.records, "the pack's calls reached the real world"
    for request, elapsed, limit, leftovers in timed.records:
        assert elapsed <= limit + SLACK, f"{request['params']} took {elapsed:.2f} s (timeout {limit:g} s)"
        assert leftovers == [], f"{request['params']} left processes behind: {leftovers}"
    assert sentinels() == [], "a host sentinel changed"


def test_the_pack_is_refused_in_process_without_running_anything(sentinels):
    for path in PACK_FILES:
        scenario = load_scenario(path)
        replayer = Replayer(scenario.policy)  # in-process real world
        for trajectory in scenario.trajectories:
            for call in replayer.replay(trajectory, scenario.spec.world, scenario.name).calls:
                if call.call.tool == "run_command":  # not run: refused as not implemented, or as bad arguments first
                    assert call.real.error_code == "501" or (call.real.error_code == "400" and "timeout" in call.real.error)
    assert sentinels() == []
