"""The sandbox's root, as data: what is bound, generated and mounted, and the bwrap command line it
renders to. (That it really isolates is tests/integration/test_sandbox_runtime.py's job.)"""

from __future__ import annotations

import json
import os

from litmus_replay.envs.runtimes import _launcher
from litmus_replay.envs.runtimes.sandbox import MOUNT_ROOT, WORLD_ROOT, SandboxOptions, etc_files, root_plan
from litmus_replay.envs.world import parse_principals


def test_etc_lists_the_principals_and_nothing_of_the_host():
    files = etc_files(parse_principals({"alice": {}, "bob": {"uid": 20000, "gid": 30000}, "bad:name": {}}))
    passwd = files["/etc/passwd"].splitlines()
    assert passwd[0].startswith("root:x:0:0:")
    assert "alice:x:10001:10001:alice:/home/alice:/bin/sh" in passwd
    assert "bob:x:20000:30000:bob:/home/bob:/bin/sh" in passwd
    assert passwd[-1].startswith("nobody:x:65534:65534:")
    assert not any(line.startswith("bad") for line in passwd)
    assert "bob:x:30000:" in files["/etc/group"]
    assert set(files) == {"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/nsswitch.conf"}


def test_root_plan_binds_read_only_what_python_needs_and_no_host_etc():
    sources, ops = root_plan(SandboxOptions(), {"/etc/passwd": 9})
    binds = {op[2]: sources[op[1]] for op in ops if op[0] == "bind"}
    assert binds["/usr"] == "/usr"
    assert binds[f"{MOUNT_ROOT}/litmus_replay/envs"].endswith("envs")
    assert os.path.basename(binds[f"{MOUNT_ROOT}/pyfakefs"]) == "pyfakefs"
    assert not any(dest.startswith("/etc/") and dest != "/etc/ld.so.cache" for dest in binds)
    assert "/etc/shadow" not in json.dumps(ops)
    for name in ("bin", "sbin", "lib", "lib64"):
        if os.path.islink(f"/{name}"):
            assert ["symlink", os.readlink(f"/{name}"), f"/{name}"] in ops
    kinds = [op[0] for op in ops]
    assert kinds[-1] == "remount-ro" and ["proc", "/proc"] in ops and ["dev", "/dev"] in ops
    tmpfs = {op[1]: op for op in ops if op[0] == "tmpfs"}
    assert tmpfs[WORLD_ROOT][2] == SandboxOptions().disk and tmpfs["/tmp"][3] == 0o1777
    # every directory above a bind is made world-readable before the binds
    first_bind = kinds.index("bind")
    assert all(op[0] == "dir" and op[2] == 0o755 for op in ops[:first_bind])


def test_bwrap_argv_unshares_everything_but_the_user_namespace():
    sources, ops = root_plan(SandboxOptions(), {"/etc/passwd": 9})
    config = {"bwrap": "/usr/bin/bwrap", "hostname": "litmus", "caps": ["CAP_SETUID"], "env": {"PATH": "/usr/bin"},
              "ops": ops, "staging": "/stage", "argv": ["/py", "-S"]}
    argv = _launcher.bwrap_argv(config)
    for flag in ("--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--die-with-parent",
                 "--clearenv", "--new-session"):
        assert flag in argv
    assert "--unshare-user" not in argv  # the launcher made (and the runtime mapped) the user namespace
    assert argv[argv.index("--cap-drop") + 1] == "ALL" and argv[argv.index("--cap-add") + 1] == "CAP_SETUID"
    assert ["--ro-bind", "/stage/0", "/usr"] == argv[argv.index("/stage/0") - 1: argv.index("/stage/0") + 2]
    assert argv[argv.index("--ro-bind-data") - 2:argv.index("--ro-bind-data") + 3] == ["--perms", "644", "--ro-bind-data", "9", "/etc/passwd"]
    assert argv[-3:] == ["--", "/py", "-S"]


def test_options_are_checked():
    import pytest

    for bad in ({"memory": 0}, {"backend": "chroot"}, {"uid_base": 0}, {"call_timeout": -1}):
        with pytest.raises(ValueError):
            SandboxOptions(**bad)


def test_the_server_may_make_a_commands_root_only_where_a_domain_needs_one():
    from litmus_replay.envs.runtimes.sandbox import server_capabilities

    for shared in (False, True):
        plain, shell = set(server_capabilities(shared, False)), set(server_capabilities(shared, True))
        assert not plain & {"CAP_SYS_ADMIN", "CAP_SYS_CHROOT"}
        assert shell - plain == {"CAP_SYS_ADMIN", "CAP_SYS_CHROOT"}
        assert "CAP_SETPCAP" in plain  # every command is exec'd without capabilities
        assert ("CAP_SETUID" in plain) is not shared  # principals sharing one uid are never switched to


def test_a_world_is_planned_as_kept_in_memory_exactly_when_the_world_itself_keeps_no_files():
    from litmus_replay.envs import World
    from litmus_replay.envs.runtimes import hosting

    for spec in ({"principals": ["alice"]},  # no domain: a world with a directory, like any other
                 {"principals": ["alice"], "bank": {}},
                 {"principals": ["alice"], "records": {}, "profiles": {}},
                 {"principals": ["alice"], "files": {}},
                 {"principals": ["alice"], "bank": {}, "files": {}}):
        world = World(spec, "real")
        try:
            keeps_files = world.env.root is not None
        finally:
            world.close()
        assert hosting.plan(spec, "real", "sandbox").in_memory is not keeps_files, spec
