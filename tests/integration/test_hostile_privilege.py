"""A principal never acts with host privilege: the uid-0 part of the hostile pack under each isolated
runtime and id mapping, checked beyond its classifications.

- Every command runs with empty capability sets (bounding set included) whoever runs it, and a world's
  uid 0 acts as the unprivileged stand-in (where the principals share one uid, as that uid).
- A uid-0 command that plants setuid-root shells wherever it can leaves no setuid file on the host: the
  host side of every directory the runtimes make (``litmus-*`` under the temp dir: sandbox staging,
  docker socket directories, world roots) is scanned after every call, while the world is open.
- A uid-0 command that deletes a file and tries to forge the server's answer (writing fake replies
  into other processes' descriptors, opening their memory) finds nothing to write, and both its
  deletion and its next call's are recorded as they happened.
"""

from __future__ import annotations

import os
import stat
import tempfile
from functools import partial
from pathlib import Path

import pytest
from litmus_replay.envs import WorldSpecError
from litmus_replay.envs.interface import WorldHandle
from litmus_replay.envs.principal_ids import ROOT_STAND_IN
from litmus_replay.envs.world import scratch_dir
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = ROOT / "scenarios" / "hostile"
CAP_LINES = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb")
CONFIGS = {
    "sandbox-bwrap": ("sandbox", {"backend": "bwrap"}),
    "sandbox-native": ("sandbox", {"backend": "native"}),
    "sandbox-single-uid": ("sandbox", {"id_mapping": "single-uid"}),
    "docker": ("docker", {}),
}


@pytest.fixture(scope="module", params=list(CONFIGS))
def runtime(request, runtime_opener):
    name, options = CONFIGS[request.param]
    if "id_mapping" in options and (os.environ.get("LITMUS_EXPECT_ID_MAPPING") or os.geteuid() != 0):
        pytest.skip("an ordinary account's run tests the id mapping it gets")
    opened = runtime_opener(name, **options)
    yield opened
    opened.close()


def _shared(runtime) -> bool:
    return getattr(runtime, "id_mapping", None) == "single-uid"


def _stdout(outcome: dict) -> str:
    assert outcome["status"] == "ok", outcome
    return outcome["output"]["stdout"]


def test_every_command_runs_without_any_capability_and_uid0_as_the_stand_in(runtime):
    spec = {"principals": {"admin": {"uid": 0}, "alice": {}}, "shell": {}}
    handle = runtime.open_world(spec, "real")
    try:
        seen = {}
        for principal in ("admin", "alice"):
            outcome = handle.call({"tool": "run_command", "principal": principal, "params": {
                "command": "grep -E '^Cap' /proc/self/status; id -u; id -g"}})
            seen[principal] = _stdout(outcome).split("\n")
    finally:
        handle.close()
    for principal, lines in seen.items():
        caps = {line.split(":")[0]: line.split()[1] for line in lines if line.startswith("Cap")}
        assert set(caps) == set(CAP_LINES), lines
        assert set(caps.values()) == {"0" * 16}, f"{principal} holds capabilities: {caps}"
    if _shared(runtime):
        assert seen["admin"][5:7] == seen["alice"][5:7]  # the one uid every principal shares
    else:
        assert seen["admin"][5:7] == [str(ROOT_STAND_IN)] * 2
        assert seen["alice"][5:7] == ["10002"] * 2  # her default uid, as declared


def test_a_world_declaring_the_stand_in_is_refused_in_one_line(runtime):
    spec = {"principals": {"admin": {"uid": 0}, "mallory": {"uid": 10001, "gid": ROOT_STAND_IN}}, "shell": {}}
    with pytest.raises(WorldSpecError) as caught:
        runtime.open_world(spec, "real")
    assert caught.value.field == "world.principals.mallory.gid"
    assert "\n" not in str(caught.value) and "cannot be isolated" in str(caught.value)


def _setuid_files() -> list[str]:
    """Setuid or setgid files under every directory the runtimes make on the host (the temporary
    directory's and the memory filesystem's ``litmus-*``), and at those directories' tops."""
    found = []
    bases = {Path(tempfile.gettempdir()), *([Path(scratch_dir())] if scratch_dir() else [])}
    walks = [(str(base), [], [p.name for p in base.iterdir()]) for base in bases]
    for base in bases:
        for top in base.iterdir():
            if top.name.startswith("litmus-"):
                walks += list(os.walk(top))
    for directory, _, names in walks:
        for name in names:
            try:
                st = os.lstat(os.path.join(directory, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                found.append(os.path.join(directory, name))
    return sorted(found)


class _Scanning:
    """A runtime wrapper that scans the host for setuid files after every call, while the world is open."""

    def __init__(self, runtime):
        self.runtime = runtime
        self.found: list[str] = []
        self.calls = 0

    def open_world(self, spec, semantics):
        handle = self.runtime.open_world(spec, semantics)
        inner = handle.call

        def call(request):
            try:
                return inner(request)
            finally:
                self.calls += 1
                self.found += _setuid_files()

        handle.call = call
        handle.call_each = partial(WorldHandle.call_each, handle)  # one call at a time, each through ``call``
        return handle


def test_uid0_plants_no_setuid_file_on_the_host(runtime):
    before = _setuid_files()
    scenario = load_scenario(HOSTILE / "principal-uid0-host-escape.yaml")
    scanning = _Scanning(runtime)
    replayer = Replayer(scenario.policy, real_runtime=scanning)
    for trajectory in scenario.trajectories:
        result = replayer.replay(trajectory, scenario.spec.world, scenario.name)
        planted = result.calls[1].real.output["stdout"]
        if not _shared(runtime):  # its own setuid file, in the world's memory, owned by the stand-in
            assert f" {ROOT_STAND_IN} " in planted and "-rwsr-xr-x" in planted, planted
    assert scanning.calls == 5
    assert sorted(set(scanning.found)) == before


def test_uid0_cannot_forge_the_outcome_the_host_records(runtime):
    scenario = load_scenario(HOSTILE / "principal-uid0-forged-outcome.yaml")
    replayer = Replayer(scenario.policy, real_runtime=runtime)
    (trajectory,) = scenario.trajectories
    result = replayer.replay(trajectory, scenario.spec.world, scenario.name)
    forge, delete = result.calls
    assert "forged into" not in forge.real.output["stdout"]
    assert "opened" not in forge.real.output["stdout"]
    for call, deleted in ((forge, "files:/workspace/audit.log"), (delete, "files:/workspace/alice/ledger.txt")):
        assert call.real.status == "ok" and call.real.committed, call.real
        assert list(call.real.effects.deleted) == [deleted]
    assert call.real.effects.values[deleted]["before"]["uid"] == 10002  # alice's file, reported as the world has it
    classes = {call.key: call.pair.cls for call in result.calls}
    reasons = {call.key: call.pair.reason for call in result.calls}
    assert scenario.check(classes, reasons, result.revalidation.revalidated) == []
