"""The ids principals act with where calls switch uid: the world's 0 never reaches the kernel as 0, every
other id is itself, owners read back as declared, a world that declares the stand-in is refused in one
line, and a command sheds every capability before it execs."""

from __future__ import annotations

import os
import shutil

import pytest
from hypothesis import given
from hypothesis import strategies as st

from litmus_replay.envs import World, WorldSpecError, thread_ids
from litmus_replay.envs.domain import WorldEnv
from litmus_replay.envs.domains import _command
from litmus_replay.envs.principal_ids import ROOT_STAND_IN, check_isolable, declared_id, kernel_id

AS_ROOT = os.geteuid() == 0
ids = st.integers(min_value=0, max_value=2**31 - 1).filter(lambda i: i != ROOT_STAND_IN)


@given(ids)
def test_every_declared_id_acts_unprivileged_and_reads_back_as_declared(declared):
    acting = kernel_id(declared)
    assert acting != 0
    assert declared_id(acting) == declared
    assert acting == declared or declared == 0


def test_the_servers_own_uid_reads_as_the_worlds_root():
    assert declared_id(0) == 0 and declared_id(ROOT_STAND_IN) == 0


@pytest.mark.parametrize("key", ["uid", "gid"])
def test_a_principal_declaring_the_stand_in_is_refused_in_one_line(key):
    principals = {"admin": {"uid": 0, "gid": 0}, "eve": {"uid": 10002, "gid": 10002}}
    principals["eve"][key] = ROOT_STAND_IN
    with pytest.raises(WorldSpecError) as caught:
        check_isolable(principals)
    assert caught.value.field == f"world.principals.eve.{key}"
    assert str(caught.value).count("\n") == 0
    assert f"{key} {ROOT_STAND_IN} cannot be isolated" in str(caught.value)


def test_a_switching_world_refuses_the_stand_in_but_an_in_process_one_need_not():
    spec = {"principals": {"eve": {"uid": ROOT_STAND_IN}}, "records": {}}
    with pytest.raises(WorldSpecError, match="world.principals.eve.uid"):
        World(spec, "real", switch_uid=True)
    with World(spec, "real"):
        pass


def _env(switch: bool) -> WorldEnv:
    principals = {"admin": {"uid": 0, "gid": 0}, "alice": {"uid": 10001, "gid": 20000}}
    return WorldEnv(principals=principals, sessions={}, ambient_session=None, root=None, switch_uid=switch)


def test_acting_as_switches_to_kernel_ids_and_leaves_the_worlds_root_with_the_servers_powers(monkeypatch):
    switched: list[tuple[str, int]] = []
    monkeypatch.setattr(thread_ids, "set_thread_euid", lambda uid: switched.append(("uid", uid)))
    monkeypatch.setattr(thread_ids, "set_thread_egid", lambda gid: switched.append(("gid", gid)))
    env = _env(True)
    with env.acting_as("alice"):
        assert switched == [("gid", 20000), ("uid", 10001)]
    assert switched[2:] == [("uid", 0), ("gid", 0)]  # root back, the uid first
    switched.clear()
    with env.acting_as("admin"):  # the domains' own code, confined to the world's root
        assert switched == []
    assert env.kernel_ids(env.ids("admin")) == (ROOT_STAND_IN, ROOT_STAND_IN)
    assert env.declared_uid(ROOT_STAND_IN) == 0
    plain = _env(False)
    assert plain.kernel_ids((0, 0)) == (0, 0) and plain.declared_uid(ROOT_STAND_IN) == ROOT_STAND_IN


@pytest.mark.skipif(not AS_ROOT, reason="chowning to the principals' kernel ids needs root")
def test_a_switching_files_world_owns_with_kernel_ids_and_reports_declared_ones(tmp_path):
    spec = {"principals": {"admin": {"uid": 0}, "alice": {"uid": 10001}},
            "files": {"workspace": "/workspace", "tree": {"/workspace/a.txt": "a",
                                                           "/workspace/b.txt": {"content": "b", "owner": "alice"}}}}
    root = tmp_path / "root"
    with World(spec, "real", root, isolated=True, switch_uid=True) as world:
        assert os.stat(root / "workspace" / "a.txt").st_uid == ROOT_STAND_IN
        assert os.stat(root / "workspace" / "b.txt").st_uid == 10001
        snap = world.snapshot()
        assert " uid=0 " in snap["files:/workspace/a.txt"]
        assert " uid=10001 " in snap["files:/workspace/b.txt"]
        outcome = world.call({"tool": "write_file", "principal": "admin", "params": {"path": "c.txt", "content": "c"}})
        assert outcome["effects"]["values"]["files:/workspace/c.txt"]["after"]["uid"] == 0
        assert os.stat(root / "workspace" / "c.txt").st_uid == ROOT_STAND_IN


@pytest.mark.skipif(not AS_ROOT, reason="switching a command's uid needs root")
@pytest.mark.parametrize("uid", [2_000_000_123, None])
def test_a_command_execs_with_every_capability_set_empty(uid):
    """As another uid, or keeping root's (None: as where the principals share one uid), the command
    holds nothing: empty bounding, inheritable, permitted, effective and ambient sets. (The uid is one
    no process of this host runs as: after the command, everything running as it is killed.)"""
    grep = shutil.which("grep")
    command = _command.Command(executable=grep, argv=["grep", "^Cap", "/proc/self/status"], env={}, cwd="/",
                               timeout=10, uid=uid, gid=uid)
    result = _command.run(command)
    caps = dict(line.split(":\t") for line in result.stdout.decode().splitlines())
    assert sorted(caps) == ["CapAmb", "CapBnd", "CapEff", "CapInh", "CapPrm"]
    assert set(caps.values()) == {"0" * 16}, caps
