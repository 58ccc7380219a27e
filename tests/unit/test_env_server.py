"""The env server and its client, over a plain child process: same outcomes as in-process, in both
semantics; protocol errors answered, not fatal; a silent server costs at most the call timeout."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from litmus_replay.envs import World, WorldSpecError
from litmus_replay.envs.client import CallTimeout, EnvClient, ServerError, ServerGone
from litmus_replay.envs.protocol import PROTOCOL_VERSION, state_digest

SPEC = {
    "principals": ["alice", "bob"],
    "sessions": {"t": "bob"},
    "session": "t",
    "files": {"tree": {"/workspace/a.txt": "hello"}, "canaries": {"/home/alice/key": "K"}},
    "records": {"rows": [{"id": 1, "owner": "bob", "data": {"s": 1}}]},
    "profiles": {"alice": {"email": "a"}, "bob": {"email": "b"}},
}
CALLS = [
    ("read_file", {"path": "/workspace/a.txt"}),
    ("make_symlink", {"target": "/home/alice", "link_path": "/workspace/h"}),
    ("write_file", {"path": "/workspace/h/key", "content": "X"}),
    ("delete_records", {"filter": "*"}),
    ("update_profile", {"field": "email", "value": "z"}),
]


@pytest.fixture()
def server(env_server):
    proc = env_server()
    return EnvClient(proc.stdout.fileno(), proc.stdin.fileno(), timeout=30)


@pytest.mark.parametrize("semantics", ["stub", "real"])
def test_server_outcomes_equal_in_process(server, semantics):
    assert server.hello()["protocol"] == PROTOCOL_VERSION
    server.request("load", spec=SPEC, semantics=semantics)
    got = [server.request("call", request={"tool": t, "params": p, "principal": "alice"}) for t, p in CALLS]
    state = server.request("snapshot")
    with World(SPEC, semantics) as world:
        want = [world.call({"tool": t, "params": p, "principal": "alice"}) for t, p in CALLS]
        assert got == want
        assert state["state"] == world.snapshot()
        assert state["digest"] == state_digest(world.snapshot())


def test_reset_rebuilds_the_initial_state(server):
    server.request("load", spec=SPEC, semantics="real")
    initial = server.request("snapshot")["digest"]
    server.request("call", request={"tool": "write_file", "params": {"path": "/workspace/a.txt", "content": "changed"},
                                    "principal": "alice"})
    assert server.request("snapshot")["digest"] != initial
    server.request("reset")
    assert server.request("snapshot")["digest"] == initial


def test_errors_are_answers_and_the_server_keeps_serving(server):
    with pytest.raises(WorldSpecError) as raised:
        server.request("load", spec={"mail": {}}, semantics="real")
    assert raised.value.field == "world.mail"
    with pytest.raises(ServerError, match="unknown op"):
        server.request("format_disk")
    with pytest.raises(ServerError, match="no world"):
        server.request("call", request={"tool": "read_file", "params": {}, "principal": "a"})
    server.request("load", spec=SPEC, semantics="stub")
    with pytest.raises(ServerError, match="UnknownTool"):
        server.request("call", request={"tool": "launch", "params": {}, "principal": "alice"})
    assert server.request("call", request={"tool": "get_profile", "params": {}, "principal": "alice"})["status"] == "ok"


def test_a_silent_server_costs_only_the_timeout():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        client = EnvClient(proc.stdout.fileno(), proc.stdin.fileno(), timeout=0.5)
        with pytest.raises(CallTimeout):  # the server never answers: only the timeout ends the wait
            client.hello()
        with pytest.raises(ServerGone):
            client.hello()
    finally:
        proc.kill()
        proc.wait()


def test_a_dead_server_is_reported_not_hung():
    proc = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    proc.wait()
    client = EnvClient(proc.stdout.fileno(), proc.stdin.fileno(), timeout=5)
    with pytest.raises(ServerGone):
        client.hello()



def test_a_server_without_site_neither_looks_for_entry_points_nor_imports_importlib_metadata(bare_envs):
    """As the isolated runtimes start it: from a bare copy of the package, with ``-S``."""
    probe = ("import sys, json; from litmus_replay.envs import server, domain; domain.domain_names();"
             "print(json.dumps([server.envs_version(), 'importlib.metadata' in sys.modules]))")
    shown = subprocess.run([sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True,
                           env={"PYTHONPATH": str(bare_envs), "PATH": "/usr/bin:/bin"}).stdout
    assert json.loads(shown) == ["unknown", False]


def test_a_world_that_keeps_no_files_gets_no_directory_and_never_sees_the_last_worlds(tmp_path):
    """An env server lays a world's files out under its root only for a world whose domains keep files;
    one that keeps its state in memory costs no directory, and the files of the world before it are gone."""
    from litmus_replay.envs.server import WorldHost

    host = WorldHost(tmp_path, isolated=False, switch_uid=False)
    root = tmp_path / "root"
    in_memory = {"principals": ["alice"], "bank": {"accounts": {"acc-a": {"owner": "alice", "balance": 5}}}}
    with_files = {"principals": ["alice"], "files": {"tree": {"/workspace/a.txt": "hello"}}}
    for spec, keeps_files in ((in_memory, False), (with_files, True), (in_memory, False), (with_files, True)):
        reply = host.handle({"id": 1, "op": "load", "spec": spec, "semantics": "real"})
        assert reply["ok"], reply
        assert root.exists() == keeps_files
        if keeps_files:
            assert (root / "workspace" / "a.txt").read_text() == "hello"
            assert not (root / "workspace" / "b.txt").exists()  # written by the last world with files
            host.handle({"id": 2, "op": "call", "request": {"tool": "write_file", "principal": "alice",
                                                               "params": {"path": "/workspace/b.txt", "content": "x"}}})
            assert (root / "workspace" / "b.txt").exists()
        else:
            balance = host.handle({"id": 2, "op": "call", "request": {"tool": "get_balance", "principal": "alice",
                                                                        "params": {"account": "acc-a"}}})
            assert balance["ok"] and balance["result"]["status"] == "ok", balance
    host.handle({"id": 3, "op": "close"})
