"""The docker runtime: the pack classifies the same as in-process, the kernel decides per-principal
access, the pool reuses containers, and no container outlives its run — after close, Ctrl-C, SIGTERM,
or (through the next run's reaper) SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from litmus_replay.envs import RuntimeUnavailable
from litmus_replay.envs.runtimes.docker.confinement import host_notice, seccomp_profile
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.scenario import find_scenarios, load_scenario

PACK = Path(__file__).resolve().parents[2] / "scenarios" / "core"
PACK_FILES = find_scenarios([PACK])
SECRET_WORLD = {
    "principals": ["alice", "bob"],
    "files": {"tree": {"/workspace/bob.key": {"content": "bob's key", "owner": "bob", "mode": "0600"},
                       "/workspace/notes.txt": "shared"}},
}


@pytest.fixture(scope="module")
def docker_runtime(runtime_opener):
    runtime = runtime_opener("docker", pool_size=2)
    yield runtime
    runtime.close()


def _read(handle, path: str, principal: str) -> dict:
    return handle.call({"tool": "read_file", "params": {"path": path}, "principal": principal})


def test_pack_replays_to_the_same_classes_as_in_process(docker_runtime, runtime_opener):
    assert PACK_FILES
    for path in PACK_FILES:
        scenario = load_scenario(path)
        in_docker = Replayer(scenario.policy, real_runtime=docker_runtime)
        reference = Replayer(scenario.policy, real_runtime=runtime_opener("inprocess"))
        for trajectory in scenario.trajectories:
            got = in_docker.replay(trajectory, scenario.spec.world, scenario.name)
            want = reference.replay(trajectory, scenario.spec.world, scenario.name)
            assert [c.pair.cls for c in got.calls] == [c.pair.cls for c in want.calls], path.name
            assert got.revalidation.revalidated == want.revalidation.revalidated, path.name


def test_the_kernel_decides_per_principal_access(docker_runtime):
    with docker_runtime.open_world(SECRET_WORLD, "real") as world:
        denied = _read(world, "/workspace/bob.key", "alice")
        assert (denied["status"], denied["error_code"]) == ("error", "EACCES")
        allowed = _read(world, "/workspace/bob.key", "bob")
        assert (allowed["status"], allowed["output"]) == ("ok", "bob's key")
        written = world.call({"tool": "write_file", "params": {"path": "/workspace/bob.key", "content": "x"},
                              "principal": "alice"})
        assert written["error_code"] == "EACCES"
        assert _read(world, "/workspace/notes.txt", "alice")["status"] == "ok"


def test_the_pool_reuses_a_container_and_never_leaks_a_world(docker_runtime):
    with docker_runtime.open_world(SECRET_WORLD, "real") as world:
        changed = world.call({"tool": "write_file", "params": {"path": "/workspace/bob.key", "content": "changed"},
                              "principal": "bob"})
        assert changed["status"] == "ok"
        first = world.snapshot()
    mine = {c.id for c in docker_runtime.engine.labelled(**{"litmus-replay.session": docker_runtime.session})}
    with docker_runtime.open_world(SECRET_WORLD, "real") as world:
        assert _read(world, "/workspace/bob.key", "bob")["output"] == "bob's key"
        assert world.snapshot() != first
    after = {c.id for c in docker_runtime.engine.labelled(**{"litmus-replay.session": docker_runtime.session})}
    assert after == mine and 1 <= len(after) <= docker_runtime.pool_size


def test_a_pooled_container_tears_down_any_world(docker_runtime):
    """Reloading needs root to remove what principals own, even in a sticky directory (CAP_FOWNER)."""
    sticky = {"principals": ["alice", "bob", "carol"],
              "files": {"tree": {"/shared/": {"dir": True, "mode": "1777", "owner": "bob"},
                                 "/shared/f": {"content": "x", "owner": "carol"}}}}
    for _ in range(docker_runtime.pool_size + 1):
        with docker_runtime.open_world(sticky, "real") as world:
            assert _read(world, "/shared/f", "alice")["output"] == "x"
            assert world.call({"tool": "delete_path", "params": {"path": "/shared/f"}, "principal": "alice"})[
                "error_code"] == "EPERM"


def test_a_world_that_ran_commands_never_hands_its_container_on(docker_runtime):
    """A shell can write the container's /tmp, which no world rebuild clears: that container is not reused."""
    spec = {"principals": ["alice"], "shell": {}}
    command = {"tool": "run_command", "principal": "alice",
               "params": {"command": "ls /tmp; echo x > /tmp/left-by-an-earlier-world"}}
    for _ in range(2):
        with docker_runtime.open_world(spec, "real") as world:
            outcome = world.call(command)
            assert outcome["status"] == "ok" and "left-by" not in outcome["output"]["stdout"]


def test_containers_are_locked_down(docker_runtime):
    with docker_runtime.open_world(SECRET_WORLD, "real") as world:
        config = docker_runtime.engine.inspect(docker_runtime.container_of(world))
    host = config["HostConfig"]
    assert host["NetworkMode"] == "none" and not host.get("PortBindings")
    assert host["ReadonlyRootfs"] is True
    assert host["CapDrop"] == ["ALL"]
    assert sorted(host["CapAdd"]) == ["CHOWN", "DAC_OVERRIDE", "FOWNER", "SETGID", "SETPCAP", "SETUID"]
    assert "no-new-privileges" in host["SecurityOpt"]
    assert host["PidsLimit"] > 0 and host["Memory"] > 0 and host["NanoCpus"] > 0
    assert set(host["Tmpfs"]) == {"/world", "/tmp"}
    assert all({"nosuid", "nodev"} <= set(options.split(",")) for options in host["Tmpfs"].values())
    envs_mount = [m for m in config["Mounts"] if m["Destination"].endswith("/litmus_replay/envs")]
    assert envs_mount and envs_mount[0]["RW"] is False
    assert [m["Destination"] for m in config["Mounts"] if m["RW"]] == []  # no host directory is writable inside
    labels = config["Config"]["Labels"]
    assert labels["litmus-replay.owner"] == str(os.getpid()) and labels["litmus-replay.session"] == docker_runtime.session


def test_only_a_container_made_for_a_shell_lets_its_server_make_a_commands_root(docker_runtime):
    with docker_runtime.open_world({**SECRET_WORLD, "shell": {}}, "real") as world:
        added = docker_runtime.engine.inspect(docker_runtime.container_of(world))["HostConfig"]["CapAdd"]
        status = world.call({"tool": "run_command", "params": {"command": "grep CapBnd /proc/self/status"},
                             "principal": "alice"})
    assert {"SYS_ADMIN", "SYS_CHROOT"} <= set(added)
    assert status["output"]["stdout"].split() == ["CapBnd:", "0000000000000000"]  # the command holds neither


def test_a_container_made_for_a_shell_runs_under_the_shipped_seccomp_profile(docker_runtime):
    with docker_runtime.open_world({**SECRET_WORLD, "shell": {}}, "real") as world:
        shell = docker_runtime.engine.inspect(docker_runtime.container_of(world))["HostConfig"]["SecurityOpt"]
        outcome = world.call({"tool": "run_command", "principal": "alice",
                              "params": {"command": "unshare -Ur id -u 2>&1 || echo refused"}})
    with docker_runtime.open_world(SECRET_WORLD, "real") as world:
        plain = docker_runtime.engine.inspect(docker_runtime.container_of(world))["HostConfig"]["SecurityOpt"]
    assert f"seccomp={seccomp_profile()}" in shell and "no-new-privileges" in shell
    assert plain == ["no-new-privileges"]  # Docker's default profile, which refuses namespaces without SYS_ADMIN
    assert outcome["output"]["stdout"].split("\n")[-2:] == ["refused", ""]  # inner root (0) never printed
    assert "Operation not permitted" in outcome["output"]["stdout"]


def test_a_host_without_apparmor_or_selinux_on_cgroup_v1_is_named_once(docker_runtime):
    done = subprocess.run([sys.executable, "-m", "litmus_replay.replay", "run", "--runtime", "docker", "-q",
                           str(PACK.parent / "hostile" / "nested-user-namespace.yaml")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    notes = [line for line in done.stderr.splitlines() if "neither AppArmor nor SELinux" in line]
    risky = host_notice(docker_runtime.engine.info()) is not None  # this engine's host, as docker info says
    assert notes == ([f"litmus-replay: note: {host_notice(docker_runtime.engine.info())}"] if risky else [])


def test_a_container_killed_under_a_world_costs_only_that_world(docker_runtime):
    world = docker_runtime.open_world(SECRET_WORLD, "real")
    docker_runtime.engine.remove(docker_runtime.container_of(world))
    with pytest.raises(Exception):
        _read(world, "/workspace/notes.txt", "alice")
    world.close()  # discards the dead container, raises nothing
    with docker_runtime.open_world(SECRET_WORLD, "real") as fresh:
        assert _read(fresh, "/workspace/notes.txt", "alice")["status"] == "ok"


def test_no_engine_is_one_line_naming_the_alternatives(monkeypatch, tmp_path):
    from litmus_replay.envs.runtimes.docker import DockerRuntime

    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-engine.sock")
    with pytest.raises(RuntimeUnavailable) as raised:
        DockerRuntime()
    message = str(raised.value)
    assert "\n" not in message and "--runtime sandbox" in message and "--runtime inprocess" in message


# --- nothing outlives a run ------------------------------------------------------------------

CHILD = textwrap.dedent(
    """
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # as a terminal gives it, even under CI
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    from pathlib import Path
    from litmus_replay.envs.runtime import get_runtime
    from litmus_replay.envs.runtimes.docker import clean_up_at_exit
    from litmus_replay.replay.engine import Replayer
    from litmus_replay.replay.scenario import find_scenarios, load_scenario

    clean_up_at_exit()  # as the command line does: containers go on SIGTERM too, not only at the with's end
    scenarios = [load_scenario(p) for p in find_scenarios([Path(sys.argv[1])])]
    with get_runtime("docker", pool_size=2) as runtime:
        held = runtime.open_world(scenarios[0].spec.world, "real")  # a second container, busy
        for round in range(10_000):
            for scenario in scenarios:
                replayer = Replayer(scenario.policy, real_runtime=runtime)
                for trajectory in scenario.trajectories:
                    replayer.replay(trajectory, scenario.spec.world, scenario.name)
            if round == 0:
                print("running", flush=True)
    """
)


def _sockdirs_of(pid: int) -> list[Path]:
    """The unix-socket directories a process's docker runtime made (named for their owner)."""
    return sorted(Path(tempfile.gettempdir()).glob(f"litmus-docker-{pid}-*"))


def _child_mid_run(leftover_containers) -> subprocess.Popen:
    """A replay in a child process, past its first round, with two containers up."""
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(PACK)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             stdin=subprocess.DEVNULL, text=True)
    line = child.stdout.readline()
    if line.strip() != "running":
        child.kill()
        pytest.fail(f"the replay child did not start: {line!r} {child.stderr.read()[-2000:]}")
    time.sleep(0.3)
    assert len(leftover_containers(child.pid)) == 2
    return child


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_an_interrupted_run_removes_its_containers(docker_runtime, docker_leftovers, signum):
    child = _child_mid_run(docker_leftovers)
    child.send_signal(signum)
    try:
        _, stderr = child.communicate(timeout=60)
    finally:
        child.kill()
    assert child.returncode != 0
    if signum == signal.SIGINT:
        assert "KeyboardInterrupt" in stderr
    assert docker_leftovers(child.pid) == []
    assert _sockdirs_of(child.pid) == []


def test_a_killed_run_is_reaped_by_the_next_runtime(docker_runtime, docker_leftovers, runtime_opener):
    child = _child_mid_run(docker_leftovers)
    child.kill()
    child.wait()
    left = docker_leftovers(child.pid)
    assert len(left) == 2, "SIGKILL runs no cleanup: its containers are still there"
    sockdirs = [Path(c.labels["litmus-replay.sockdir"])
                for c in docker_runtime.engine.labelled(**{"litmus-replay.owner": str(child.pid)})]
    assert sockdirs and _sockdirs_of(child.pid)
    runtime_opener("docker").close()  # constructing a runtime runs the reaper
    assert docker_leftovers(child.pid) == []
    assert not any(d.exists() for d in sockdirs) and _sockdirs_of(child.pid) == []


def test_closing_the_runtime_removes_every_container(runtime_opener):
    runtime = runtime_opener("docker", pool_size=1)
    held = runtime.open_world(SECRET_WORLD, "real")  # in use when the runtime closes
    with runtime.open_world(SECRET_WORLD, "real"):
        pass
    session = {"litmus-replay.session": runtime.session}
    containers = runtime.engine.labelled(**session)
    assert len(containers) == 2
    sockdirs = [Path(c.labels["litmus-replay.sockdir"]) for c in containers]
    assert all(d.is_dir() for d in sockdirs)
    runtime.close()
    assert not any(d.exists() for d in sockdirs)
    held.close()  # after its runtime: a no-op, not an error
    from litmus_replay.envs.runtimes.docker import Engine

    engine = Engine.connect()
    try:
        assert engine.labelled(**session) == []
    finally:
        engine.close()
