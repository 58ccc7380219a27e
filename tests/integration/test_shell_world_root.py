"""A shell command sees the world's tree at the paths the files domain resolves, in every isolated runtime:
what it does there is the world's (effects, snapshots, the files domain's reads), the system's directories
stay the system's and read-only whatever the world holds at their names, and nothing of the server is in
its root. Nor does it keep any capability."""

from __future__ import annotations

import pytest

TREE = {
    "/workspace/build/app.o": "obj\n",
    "/workspace/cache": {"symlink": "/home/alice/thesis"},
    "/home/alice/": {"dir": True, "owner": "alice"},
    "/home/alice/thesis/ch1.tex": {"content": "one\n", "owner": "alice"},
    "/home/bob/": {"dir": True, "owner": "bob", "mode": "0700"},
    "/home/bob/secret.txt": {"content": "s3cr3t\n", "owner": "bob", "mode": "0600"},
    "/etc/app.conf": {"content": "k=v\n", "owner": "alice"},
    "/etc/passwd": "forged:x:0:0::/:/bin/sh\n",
    "/usr": {"symlink": "/home/alice"},
    "/srv/data.txt": "data\n",
}


@pytest.fixture(scope="module")
def world(isolated_runtime):
    handle = isolated_runtime.open_world({"principals": ["alice", "bob"], "shell": {"timeout": 5},
                                          "files": {"tree": TREE}}, "real")
    yield handle
    handle.close()


def _run(handle, command: str, principal: str = "alice") -> dict:
    outcome = handle.call({"tool": "run_command", "params": {"command": command}, "principal": principal})
    assert outcome["status"] == "ok", outcome
    return outcome


def _lines(outcome: dict) -> list[str]:
    return outcome["output"]["stdout"].splitlines()


def test_absolute_world_paths_act_on_the_world(world):
    outcome = _run(world, "rm -rf /workspace/build; echo made > /srv/new.txt; cat /srv/data.txt; pwd; echo $HOME")
    assert _lines(outcome) == ["data", "/workspace", "/home/alice"]
    assert outcome["effects"]["deleted"] == ["files:/workspace/build", "files:/workspace/build/app.o"]
    assert outcome["effects"]["created"] == ["files:/srv/new.txt"]
    read = world.call({"tool": "read_file", "params": {"path": "/srv/new.txt"}, "principal": "bob"})
    assert read["output"] == "made\n"


def test_a_world_symlink_resolves_inside_the_world_as_the_files_domain_resolves_it(world):
    outcome = _run(world, "readlink /workspace/cache; cat /workspace/cache/ch1.tex; realpath /workspace/cache")
    assert _lines(outcome) == ["/home/alice/thesis", "one", "/home/alice/thesis"]


def test_the_kernel_still_decides_what_a_principal_may_touch(world):
    outcome = _run(world, "cat /home/bob/secret.txt; echo status $?")
    assert "status 1" in _lines(outcome) and "s3cr3t" not in outcome["output"]["stdout"]
    assert _lines(_run(world, "cat /home/bob/secret.txt", principal="bob")) == ["s3cr3t"]


def test_the_worlds_etc_lies_over_a_read_only_system_etc(world):
    outcome = _run(world, "cat /etc/app.conf; grep -c '^forged' /etc/passwd; grep -c '^root:' /etc/passwd; "
                          "echo k=w > /etc/app.conf; touch /etc/new.conf 2>/dev/null || echo refused")
    assert _lines(outcome) == ["k=v", "0", "1", "refused"]
    assert outcome["effects"]["changed"] == ["files:/etc/app.conf"] and outcome["effects"]["created"] == []
    notes = " ".join(outcome["resolution"]["evidence"])
    assert "/etc/passwd" in notes and "/usr" in notes  # what the command does not see is said


def test_a_world_entry_named_like_a_system_directory_never_replaces_it(world):
    outcome = _run(world, "test -L /usr && echo link; test -x /usr/bin/bash && echo system; "
                          "touch /usr/evil 2>/dev/null || echo ro-usr; touch /bin/evil 2>/dev/null || echo ro-bin; "
                          "touch /newtop 2>/dev/null || echo ro-root; rm -rf /etc 2>/dev/null; test -f /etc/passwd && echo etc")
    assert _lines(outcome) == ["system", "ro-usr", "ro-bin", "ro-root", "etc"]
    assert outcome["effects"]["deleted"] == []  # a bound world entry cannot be removed from under its mount
    after = world.call({"tool": "list_dir", "params": {"path": "/usr"}, "principal": "alice"})
    assert "thesis" in after["output"]  # the world's own /usr symlink is untouched, and still the world's


def test_nothing_of_the_server_is_in_the_commands_root(world):
    outcome = _run(world, "ls -a /; for p in /world /opt/litmus /run/litmus; do test -e $p && echo seen $p; done; "
                          "grep -E '^Cap(Inh|Prm|Eff|Bnd|Amb)' /proc/self/status")
    lines = _lines(outcome)
    assert not [line for line in lines if line.startswith("seen")]
    assert set(lines[: lines.index("workspace") + 1]) >= {"etc", "home", "srv", "usr", "proc", "dev", "tmp"}
    caps = [line.split()[1] for line in lines if line.startswith("Cap")]
    assert len(caps) == 5 and set(caps) == {"0000000000000000"}


def test_the_worlds_tmp_is_the_commands_tmp_when_the_world_has_one(isolated_runtime):
    tree = {"/tmp/report.txt": "r\n", "/workspace/a.txt": "a\n"}
    with isolated_runtime.open_world({"principals": ["alice"], "shell": {}, "files": {"tree": tree}}, "real") as handle:
        outcome = _run(handle, "cat /tmp/report.txt; echo x > /tmp/made.txt")
        assert _lines(outcome) == ["r"] and outcome["effects"]["created"] == ["files:/tmp/made.txt"]
