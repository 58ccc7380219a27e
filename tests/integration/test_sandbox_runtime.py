"""The sandbox runtime on this machine, with each backend (bwrap where installed, and the launcher's own):
a uid-mapped user namespace whose root is not host root, the kernel deciding per-principal access (or,
where the principals share one uid, the files domain), a minimal root without the host's /etc,
loopback-only networking, teardown of the whole process tree, the per-call backstop, and a one-line
refusal where namespaces cannot be made.

As root this runs the host-range mapping; ``tests/integration/test_rootless.py`` reruns it as ordinary
accounts, with and without subordinate ids."""

from __future__ import annotations

import os
import shutil
import signal
import time

import pytest

from litmus_replay.envs import RuntimeUnavailable, WorldSpecError
from litmus_replay.envs.runtime import get_runtime, runtime_names
from litmus_replay.envs.runtimes import hosting
from litmus_replay.envs.runtimes._idmap import held_ids
from litmus_replay.envs.runtimes import sandbox as sandbox_module
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.model import Trajectory
from litmus_replay.replay.policy import Policy, PolicySpec

BACKENDS = ["bwrap", "native"] if shutil.which("bwrap") else ["native"]
WORLD = {
    "principals": ["alice", "bob"],
    "shell": {"timeout": 5},
    "files": {"tree": {"/workspace/notes.txt": "shared\n",
                       "/home/bob/secret": {"content": "bob's key\n", "owner": "bob", "mode": "0600"}}},
}


@pytest.fixture(scope="module", params=BACKENDS)
def sandbox(request, runtime_opener):
    runtime = runtime_opener("sandbox", backend=request.param)
    yield runtime
    runtime.close()


@pytest.fixture
def world(sandbox):
    handle = sandbox.open_world(WORLD, "real")
    yield handle
    handle.close()


def _sh(handle, command: str, principal: str = "alice") -> dict:
    outcome = handle.call({"tool": "run_command", "params": {"command": command}, "principal": principal})
    assert outcome["status"] == "ok", outcome
    return outcome["output"]


def _host_status(pid: int) -> dict[str, str]:
    with open(f"/proc/{pid}/status") as handle:
        return dict(line.split(":", 1) for line in handle.read().splitlines() if ":" in line)


def _server_pid(handle) -> int:
    pid = handle.sandbox.server_pid()
    assert pid is not None, "no env server in the sandbox's process tree"
    return pid


def test_registered_with_its_options():
    assert "sandbox" in runtime_names()
    with pytest.raises(TypeError, match="colour"):
        get_runtime("sandbox", colour="blue")


def test_the_server_reads_its_messages_with_the_hosts_msgspec(world):
    """The sandbox runs this interpreter, so msgspec (compiled for it) is mounted beside the package."""
    assert world.sandbox.info["decoder"] == "msgspec"
    assert any(mount.target == "msgspec" for mount in hosting.base_mounts())
    assert all(mount.target != "msgspec" for mount in hosting.base_mounts(foreign_python=True))


def test_the_server_is_root_of_a_user_namespace_mapped_to_unprivileged_ids(sandbox, world):
    assert world.sandbox.info["uid"] == 0 and world.sandbox.info["isolated"] is True
    host_root = sandbox.idmap.host_uid(0)
    assert host_root is not None and host_root != 0
    if os.geteuid() == 0:
        assert sandbox.id_mapping == "host-range"
        # no user, group or subordinate range holds any id the sandbox maps onto
        assert not [whose for start, count, whose in held_ids() if start < host_root + 65536 and host_root < start + count]
    else:  # an ordinary user's sandbox: its root is the user, never anyone else
        assert sandbox.id_mapping in ("subordinate", "single-uid") and host_root == os.geteuid()
    host = _host_status(_server_pid(world))
    assert host["Uid"].split()[:3] == [str(host_root)] * 3
    uid_map = [line.split() for line in _sh(world, "cat /proc/self/uid_map")["stdout"].splitlines()]
    assert uid_map == [[str(n) for n in line] for line in sandbox.idmap.uid_lines]
    if sandbox.id_mapping == "single-uid":
        assert world.sandbox.info["shared_uid"] is True
        assert _sh(world, "id -u; grep CapEff /proc/self/status")["stdout"].split() == ["0", "CapEff:", "0" * 16]
    else:
        assert sum(count for _, _, count in sandbox.idmap.uid_lines) == 65536
        assert _sh(world, "id -u; id -G")["stdout"].split() == ["10001", "10001"]
        assert _sh(world, "id -u", principal="bob")["stdout"].split() == ["10002"]
        assert sandbox.idmap.host_uid(10001) not in (None, 0, os.geteuid())


def test_per_principal_access_is_decided(sandbox, world):
    request = {"tool": "read_file", "params": {"path": "/home/bob/secret"}}
    denied = world.call({**request, "principal": "alice"})
    assert (denied["status"], denied["error_code"]) == ("error", "EACCES")
    assert world.call({**request, "principal": "bob"})["output"] == "bob's key\n"
    if sandbox.id_mapping == "single-uid":
        assert sandbox.notice and "\n" not in sandbox.notice and "uidmap" in sandbox.notice
        return  # commands share the one uid: the notice says so
    assert sandbox.idmap.notice is None  # ids in full: at most the note that no memory cgroup is delegated here
    assert sandbox.notice is None or ("memory cgroup" in sandbox.notice and "\n" not in sandbox.notice)
    assert "Permission denied" in _sh(world, "cat ../home/bob/secret")["stderr"]
    assert _sh(world, "cat ../home/bob/secret", principal="bob")["stdout"] == "bob's key\n"


def test_a_minimal_root_without_the_hosts_etc(world):
    out = _sh(world, "hostname; ls /etc; ls /; grep -c . /etc/passwd; test -e /etc/shadow || echo no-shadow")["stdout"]
    lines = out.split()
    assert lines[0] == "litmus"
    assert {"passwd", "group", "hosts"} <= set(lines) and "shadow" not in lines and "no-shadow" in lines
    assert "alice:x:10001" in _sh(world, "cat /etc/passwd")["stdout"]
    denied = _sh(world, "touch /usr/x /etc/x /x 2>&1; echo done")["stdout"]  # the command's root too
    assert denied.count("Read-only file system") == 3


def test_only_a_loopback_interface(world):
    interfaces = [line.split(":")[0].strip() for line in _sh(world, "tail -n +3 /proc/net/dev")["stdout"].splitlines()]
    assert interfaces == ["lo"]
    out = _sh(world, "exec 3<>/dev/tcp/192.0.2.1/80 && echo connected")
    assert out["exit_code"] != 0 and "connected" not in out["stdout"]


def test_its_own_pid_namespace(world):
    out = _sh(world, "echo $$; cat /proc/1/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'")["stdout"].splitlines()
    assert int(out[0]) < 100 and int(out[2]) < 20  # a handful of processes, not the host's
    assert "systemd" not in out[1] and "init" not in out[1].split("/")[-1:]


def test_closing_kills_the_whole_process_tree(sandbox):
    runtime = get_runtime("sandbox", backend=sandbox.backend, reuse=0, warm=False)
    try:
        handle = runtime.open_world(WORLD, "real")
        pids = handle.sandbox.host_pids()
        assert len(pids) >= 2  # launcher (bwrap, or the monitor), the namespace's pid 1: the server itself
        assert handle.sandbox.server_pid() == pids[1]
        handle.close()
        assert all(_gone(pid) for pid in pids)
    finally:
        runtime.close()


def test_stopping_a_sandbox_ends_its_server_even_after_the_server_acted_as_a_principal(sandbox):
    """Acting as a principal changes the server's ids, and with them the kernel drops the parent-death
    signal that would end it with its launcher: stopping the sandbox must end the server itself."""
    runtime = get_runtime("sandbox", backend=sandbox.backend, warm=False)
    try:
        handle = runtime.open_world(WORLD, "real")
        for principal in ("bob", "alice"):
            handle.call({"tool": "read_file", "params": {"path": "/home/bob/secret"}, "principal": principal})
        server = _server_pid(handle)
        host = handle.sandbox
        handle.close()
        runtime.close()
        assert host.process is not None and host.process.returncode is not None
        assert _gone(server, timeout=0.0), "the server outlived the sandbox's stop"
    finally:
        runtime.close()


def test_a_clean_world_leaves_its_sandbox_for_the_next_and_a_shell_world_does_not(sandbox):
    runtime = get_runtime("sandbox", backend=sandbox.backend, warm=False)
    try:
        first = runtime.open_world(WORLD, "real")
        first.call({"tool": "write_file", "params": {"path": "/workspace/left.txt", "content": "x"}, "principal": "alice"})
        used = first.sandbox
        first.close()
        second = runtime.open_world(WORLD, "real")
        assert second.sandbox is used, "a world that only touched contained domains hands its sandbox on"
        assert "files:/workspace/left.txt" not in second.snapshot(), "the next world starts from its own spec"
        _sh(second, "touch /tmp/left-behind")
        second.close()
        third = runtime.open_world(WORLD, "real")
        assert third.sandbox is not used, "a world that ran a shell command never hands its sandbox on"
        assert "left-behind" not in _sh(third, "ls /tmp")["stdout"]
        third.close()
        pids = used.host_pids()
        runtime.close()
        assert all(_gone(pid) for pid in pids)
    finally:
        runtime.close()


def test_worlds_kept_in_memory_share_a_sandbox_whatever_their_principals(sandbox):
    runtime = get_runtime("sandbox", backend=sandbox.backend, warm=False)
    try:
        first = runtime.open_world({"principals": ["alice"],
                                    "bank": {"accounts": {"acc-a": {"owner": "alice", "balance": 5}}}}, "real")
        used = first.sandbox
        first.close()
        second = runtime.open_world({"principals": ["carol", "dave"],
                                     "bank": {"accounts": {"acc-c": {"owner": "carol", "balance": 7}}}}, "real")
        assert second.sandbox is used, "a bank world reads no /etc: other principals, the same sandbox"
        balance = second.call({"tool": "get_balance", "params": {"account": "acc-c"}, "principal": "carol"})
        assert balance["status"] == "ok" and balance["output"]["balance"] == 7, balance
        second.close()
        files = runtime.open_world({"principals": ["carol"], "files": {"tree": {"/workspace/a": "x"}}}, "real")
        assert files.sandbox is not used, "a world with files gets a sandbox whose /etc lists its principals"
        files.close()
    finally:
        runtime.close()


def test_a_world_kept_in_memory_runs_in_a_sandbox_made_for_files_which_stays_the_files_worlds(sandbox):
    runtime = get_runtime("sandbox", backend=sandbox.backend, warm=False)
    files_world = {"principals": ["carol"], "files": {"tree": {"/workspace/a": "x"}}}
    try:
        files = runtime.open_world(files_world, "real")
        made = files.sandbox
        written = files.call({"tool": "write_file", "principal": "carol",
                              "params": {"path": "/workspace/b", "content": "left behind"}})
        assert written["status"] == "ok", written
        files.close()
        bank = runtime.open_world({"principals": ["dave"],
                                   "bank": {"accounts": {"acc-d": {"owner": "dave", "balance": 9}}}}, "real")
        assert bank.sandbox is made and len(runtime.pool.hosts()) == 1, "a bank world reads no /etc: no new sandbox"
        balance = bank.call({"tool": "get_balance", "params": {"account": "acc-d"}, "principal": "dave"})
        assert balance["status"] == "ok" and balance["output"]["balance"] == 9, balance
        bank.close()
        again = runtime.open_world(files_world, "real")
        assert again.sandbox is made, "the sandbox went back idle as the files world's"
        gone = again.call({"tool": "read_file", "params": {"path": "/workspace/b"}, "principal": "carol"})
        assert gone["status"] == "error", "the last files world's file is not in the next one"
        again.close()
    finally:
        runtime.close()


def test_a_sandbox_is_retired_once_its_server_has_used_half_its_cpu_limit(sandbox):
    bank = {"principals": ["alice"], "bank": {"accounts": {"acc-a": {"owner": "alice", "balance": 5}}}}
    runtime = get_runtime("sandbox", backend=sandbox.backend, warm=False)
    try:
        first = runtime.open_world(bank, "real")
        used = first.sandbox
        spent = used.server_cpu()
        assert spent is not None and 0 <= spent < runtime.options.cpu / 2, spent
        first.close()
        second = runtime.open_world(bank, "real")
        assert second.sandbox is used
        used.server_cpu = lambda: runtime.options.cpu / 2  # as if its worlds had kept it busy for minutes
        second.close()
        third = runtime.open_world(bank, "real")
        assert third.sandbox is not used, "a server near RLIMIT_CPU hosts no more worlds"
        third.close()
    finally:
        runtime.close()


def test_prepared_sandboxes_wait_for_their_worlds_and_a_spec_it_would_refuse_is_skipped(sandbox):
    runtime = get_runtime("sandbox", backend=sandbox.backend, warm=False)
    try:
        other = {"principals": ["carol"], "records": {}}
        refused = {"principals": {"alice": {"uid": 70000}}}
        runtime.prepare([WORLD, other, refused, WORLD], "real")
        prepared = runtime.pool.hosts()
        assert len(prepared) == 2 and runtime.pool.idle == 2  # one per key; the refused spec starts none
        handle = runtime.open_world(WORLD, "real")
        assert handle.sandbox in prepared and len(runtime.pool.hosts()) == 2
        outcome = handle.call({"tool": "read_file", "params": {"path": "/workspace/notes.txt"}, "principal": "alice"})
        assert outcome["status"] == "ok" and outcome["output"] == "shared\n"
        handle.close()
        with pytest.raises(WorldSpecError):
            runtime.open_world(refused, "real")
        pids = [pid for host in prepared for pid in host.host_pids()]
        runtime.close()
        assert all(_gone(pid) for pid in pids)
    finally:
        runtime.close()


def test_a_prepared_sandbox_builds_one_of_its_worlds_while_it_boots_and_is_not_used_if_that_failed(sandbox):
    runtime = get_runtime("sandbox", backend=sandbox.backend, warm=False)
    try:
        good = {"principals": ["alice"], "files": {"tree": {"/workspace/a.txt": "a\n"}}}
        bad = {"principals": ["alice"], "files": {"tree": {"relative": "x"}}}  # refused by the server's load
        runtime.prepare([good], "real")
        (warmed,) = runtime.pool.hosts()
        assert [reply.message_id for reply in warmed.client._unread] == [1, 2, 3]  # hello, load, close
        world = runtime.open_world(good, "real")
        assert world.sandbox is warmed and all(reply.message_id > 3 for reply in warmed.client._unread)
        world.close()
        runtime.close()
        runtime = get_runtime("sandbox", backend=sandbox.backend, warm=False)
        runtime.prepare([bad], "real")
        (spoiled,) = runtime.pool.hosts()
        world = runtime.open_world(good, "real")
        assert world.sandbox is not spoiled and spoiled.process.returncode is not None
        world.close()
    finally:
        runtime.close()


def test_the_warm_spare_builds_one_of_its_worlds_while_the_current_world_runs_and_says_hello_once(sandbox):
    runtime = get_runtime("sandbox", backend=sandbox.backend, reuse=0)  # no reuse: every world wants a spare
    try:
        first = runtime.open_world(WORLD, "real")
        spare = runtime.pool._spare[1]
        assert [reply.message_id for reply in spare.client._unread] == [1, 2, 3]  # hello, load, close
        first.close()
        second = runtime.open_world(WORLD, "real")
        assert second.sandbox is spare and spare.info["protocol"]
        assert [reply.message_id for reply in spare.client._unread] == [5]  # its load was 4; the snapshot behind it
        assert "files:/workspace/notes.txt" in second.snapshot()
        second.close()
    finally:
        runtime.close()


def test_a_world_opened_ahead_is_built_while_the_caller_works_and_a_refusal_waits_for_the_result(sandbox):
    runtime = get_runtime("sandbox", backend=sandbox.backend, warm=False)
    try:
        refused = runtime.open_ahead({"principals": {"alice": {"uid": 70000}}}, "real")  # raises nothing yet
        pending = runtime.open_ahead(WORLD, "real")
        (host,) = runtime.pool.hosts()
        assert host.client._unread, "the load is on its way before the world is asked for"
        world = pending.result()
        assert world.sandbox is host and "files:/workspace/notes.txt" in world.snapshot()
        world.close()
        runtime.open_ahead(WORLD, "real").cancel()  # given up unused: its sandbox waits for the next world
        assert runtime.pool.hosts() == [host] and runtime.pool.idle == 1
        with pytest.raises(WorldSpecError):
            refused.result()
    finally:
        runtime.close()


def test_calls_sent_behind_the_load_answer_as_the_worlds_own_calls_and_its_report_rides_behind_them(sandbox):
    requests = [{"tool": "write_file", "params": {"path": "/workspace/new.txt", "content": "x"}, "principal": "alice"},
                {"tool": "read_file", "params": {"path": "/home/bob/secret"}, "principal": "alice"},
                {"tool": "no_such_tool", "params": {}, "principal": "alice"},
                {"tool": "read_file", "params": {"path": "/workspace/new.txt"}, "principal": "bob"}]
    runtime = get_runtime("sandbox", backend=sandbox.backend, warm=False)
    try:
        with runtime.open_world(WORLD, "real") as plain:
            before = plain.snapshot()
            expected = [outcome if isinstance(outcome, dict) else type(outcome).__name__
                        for outcome in plain.call_each(requests)]
            after, expected_report = plain.snapshot(), plain.report()
        pending = runtime.open_ahead(WORLD, "real")
        outcomes = pending.call_each(requests, then_report=True)
        (host,) = runtime.pool.hosts()
        # load, its snapshot, every call and the report are on their way before the world is asked for
        assert len(host.client._unread) == 2 + len(requests) + 1
        world = pending.result()
        assert world.snapshot() == before  # the first snapshot is the world before the calls
        assert [outcome if isinstance(outcome, dict) else type(outcome).__name__ for outcome in outcomes] == expected
        assert world.report() == expected_report and not host.client._unread  # no report asked again
        assert world.snapshot() == after
        world.close()
    finally:
        runtime.close()


def test_a_call_past_the_backstop_kills_the_sandbox_and_the_later_calls_replay_in_a_rebuilt_world(sandbox):
    runtime = get_runtime("sandbox", backend=sandbox.backend, call_timeout=1.0, warm=False)
    stopped: list[int] = []

    class Stopping:
        """Opens real worlds whose server freezes (SIGSTOP) at the first call: every call hangs."""

        def open_world(self, spec, semantics):
            handle = runtime.open_world(spec, semantics)
            call, call_each = handle.call, handle.call_each

            def freeze():
                if not stopped:
                    stopped.extend(handle.sandbox.host_pids())
                    os.kill(_server_pid(handle), signal.SIGSTOP)

            def freeze_then_call(request):
                freeze()
                return call(request)

            def freeze_then_call_each(requests):
                freeze()
                return call_each(requests)

            handle.call, handle.call_each = freeze_then_call, freeze_then_call_each
            return handle

    trajectory = Trajectory.model_validate({"id": "hang", "principal": "alice", "turns": [
        {"calls": [{"tool": "read_file", "arguments": {"path": "/workspace/notes.txt"}},
                   {"tool": "list_dir", "arguments": {"path": "/workspace"}}]}]})
    try:
        world = {key: value for key, value in WORLD.items() if key != "shell"}  # no command to outlast
        result = Replayer(Policy.compile(PolicySpec(), "test"), real_runtime=Stopping()).replay(trajectory, world)
    finally:
        runtime.close()
    first, second = result.calls
    assert first.real is None and first.harness_error.startswith("CallTimeout") and "built again" in first.harness_error
    assert first.pair.reason.value == "no_commit"  # one backstop, then a fresh sandbox for the rest of the run
    assert second.harness_error is None and second.real is not None and second.real.status == "ok"
    assert all(_gone(pid) for pid in stopped)


def test_the_backstop_outlasts_the_worlds_longest_command(sandbox):
    def backstop(spec, default):
        return hosting.plan(spec, "real", "sandbox").call_timeout(default)

    assert backstop({}, 30.0) == 30.0
    assert backstop({"shell": {"max_timeout": 60}}, 30.0) == 65.0
    assert backstop({"shell": {}}, 1.0) == 25.0


def test_principal_ids_outside_the_map_are_a_spec_error(sandbox):
    with pytest.raises(WorldSpecError) as raised:
        sandbox.open_world({"principals": {"alice": {"uid": 70000}}}, "real")
    assert raised.value.field == "world.principals.alice.uid"


def test_a_bad_spec_leaves_no_sandbox_behind(sandbox):
    with pytest.raises(WorldSpecError):
        sandbox.open_world({"principals": ["alice"], "files": {"tree": {"relative": "x"}}}, "real")
    spare = {id(sandbox.pool._spare[1])} if sandbox.pool._spare else set()
    assert {id(host) for host in sandbox.pool.hosts()} == spare  # only the warm sandbox for the next world is left


@pytest.mark.parametrize("setting, value", [("user.max_user_namespaces", "0"),
                                            ("kernel.unprivileged_userns_clone", "0"),
                                            ("kernel.apparmor_restrict_unprivileged_userns", "1")])
def test_unavailable_where_user_namespaces_are_disabled_naming_the_setting(monkeypatch, setting, value):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # two of the settings concern ordinary users only
    files = {"/proc/sys/" + setting.replace(".", "/"): value}
    monkeypatch.setattr(sandbox_module._idmap, "_read", lambda path: files.get(path))
    with pytest.raises(RuntimeUnavailable) as raised:
        get_runtime("sandbox")
    message = str(raised.value)
    assert "\n" not in message and f"{setting} = {value}" in message
    assert "--runtime docker" in message and "--runtime inprocess" in message


def test_unavailable_without_bwrap_when_bwrap_is_asked_for(monkeypatch):
    monkeypatch.setattr(sandbox_module.shutil, "which", lambda name: None)
    with pytest.raises(RuntimeUnavailable, match="apt-get install bubblewrap.*--runtime docker"):
        get_runtime("sandbox", backend="bwrap")


def _gone(pid: int, timeout: float = 5.0) -> bool:
    """Whether a host process has exited (it may linger as a zombie until its reaper collects it)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                state = handle.read().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state in ("Z", "X"):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)
