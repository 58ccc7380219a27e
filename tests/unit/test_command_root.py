"""The plan of a shell command's root: the world at its own paths, and no system directory ever the world's.

The plan is computed from two real directory trees (a stand-in for the runtime's system and a world);
laying it out needs a mount namespace, which the shell's integration tests do in every isolated runtime.
"""

from __future__ import annotations

import os
import posixpath

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litmus_replay.envs.domains._command_root import KERNEL, SCRATCH, SYSTEM, plan


def _tree(root, entries: dict[str, str | None]) -> None:
    """Make ``entries`` (relative path -> file content, ``"->target"`` for a symlink, None for a directory)."""
    for path, value in entries.items():
        full = os.path.join(root, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        if value is None:
            os.makedirs(full, exist_ok=True)
        elif value.startswith("->"):
            os.symlink(value[2:], full)
        else:
            with open(full, "w") as handle:
                handle.write(value)


def _system(tmp_path):
    system = tmp_path / "system"
    _tree(system, {"usr/bin/bash": "elf", "usr/lib/libc.so": "elf", "bin": "->usr/bin", "etc/passwd": "root:x:0:0",
                   "etc/hosts": "127.0.0.1", "etc/ssl/cert.pem": "pem", "proc": None, "dev": None, "tmp": None,
                   "opt/litmus/server.py": "code", "world": None})
    return str(system)


def _ops_by_path(root_plan):
    found: dict[str, list[tuple[str, ...]]] = {}
    for op in root_plan.ops:
        found.setdefault(op[1], []).append(op)
    return found


def test_the_worlds_top_level_entries_are_bound_at_their_own_paths(tmp_path):
    world = tmp_path / "world"
    _tree(world, {"workspace/x/a.txt": "a", "home/alice/n.txt": "n", "notes": "top", "cache": "->/home/alice"})
    ops = _ops_by_path(plan(str(world), _system(tmp_path)))
    assert ops["/workspace"] == [("dir", "/workspace"), ("world", "/workspace", str(world / "workspace"), "dir")]
    assert ops["/home"][-1] == ("world", "/home", str(world / "home"), "dir")
    assert ops["/notes"] == [("file", "/notes"), ("world", "/notes", str(world / "notes"), "file")]
    assert ops["/cache"] == [("symlink", "/cache", "/home/alice")]  # resolved inside the command's root


def test_the_system_is_bound_read_only_and_nothing_else_of_the_runtime_is(tmp_path):
    system = _system(tmp_path)
    root_plan = plan(_empty(tmp_path), system)
    ops = _ops_by_path(root_plan)
    assert ops["/usr"][-1] == ("system", "/usr", os.path.join(system, "usr"))
    assert ops["/etc"][-1] == ("system", "/etc", os.path.join(system, "etc"))
    assert ops["/bin"] == [("symlink", "/bin", "usr/bin")]
    assert ops["/proc"][-1][0] == ops["/dev"][-1][0] == ops["/tmp"][-1][0] == "kernel"
    assert "/opt" not in ops and "/world" not in ops  # the server's code and the world's parent stay out
    assert root_plan.hidden == ()


def _empty(tmp_path) -> str:
    path = tmp_path / "empty-world"
    path.mkdir()
    return str(path)


def test_the_worlds_etc_is_merged_beside_the_systems_and_never_replaces_an_entry(tmp_path):
    world = tmp_path / "world"
    _tree(world, {"etc/app.conf": "k=v", "etc/passwd": "forged", "etc/ssl/mine.pem": "mine", "etc/hosts": None})
    system = _system(tmp_path)
    root_plan = plan(str(world), system)
    ops = _ops_by_path(root_plan)
    assert ops["/etc"] == [("dir", "/etc")]  # a read-only directory of the root, not the world's
    assert ops["/etc/app.conf"][-1] == ("world", "/etc/app.conf", str(world / "etc/app.conf"), "file")
    assert ops["/etc/passwd"][-1] == ("system", "/etc/passwd", os.path.join(system, "etc/passwd"))
    assert ops["/etc/hosts"][-1][0] == "system"
    assert ops["/etc/ssl"] == [("dir", "/etc/ssl")]
    assert ops["/etc/ssl/cert.pem"][-1][0] == "system" and ops["/etc/ssl/mine.pem"][-1][0] == "world"
    assert set(root_plan.hidden) == {"/etc/passwd", "/etc/hosts"}


def test_a_world_entry_named_like_a_system_or_kernel_directory_is_not_shown(tmp_path):
    world = tmp_path / "world"
    _tree(world, {"usr": "->/home/alice/usr", "bin": None, "bin/sh": "#!evil", "proc/x": "x", "dev": "file",
                  "home/alice/usr/bin/bash": "evil"})
    system = _system(tmp_path)
    root_plan = plan(str(world), system)
    ops = _ops_by_path(root_plan)
    assert ops["/usr"][-1] == ("system", "/usr", os.path.join(system, "usr"))
    assert ops["/bin"] == [("symlink", "/bin", "usr/bin")]
    assert ops["/proc"][-1][0] == "kernel" and ops["/dev"][-1][0] == "kernel"
    assert set(root_plan.hidden) == {"/usr", "/bin", "/proc", "/dev"}


def test_tmp_is_the_worlds_when_the_world_has_one(tmp_path):
    world = tmp_path / "world"
    _tree(world, {"tmp/report.txt": "r"})
    system = _system(tmp_path)
    assert _ops_by_path(plan(str(world), system))["/tmp"][-1] == ("world", "/tmp", str(world / "tmp"), "dir")
    other = tmp_path / "other"
    _tree(other, {"tmp": "a file"})
    root_plan = plan(str(other), system)
    assert _ops_by_path(root_plan)["/tmp"][-1][0] == "kernel" and root_plan.hidden == ("/tmp",)


NAMES = st.sampled_from([*SYSTEM[:2], "etc", "proc", "tmp", "ssl", "bash", "passwd", "home", "workspace", "x"])
KINDS = st.sampled_from(["file", "dir", "link"])
PATHS = st.lists(NAMES, min_size=1, max_size=3).map(lambda parts: "/".join(parts))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entries=st.dictionaries(PATHS, KINDS, max_size=12))
def test_every_world_entry_is_shown_or_hidden_and_no_system_entry_is_ever_the_worlds(tmp_path_factory, entries):
    tmp = tmp_path_factory.mktemp("tree")
    world = tmp / "world"
    world.mkdir()
    made: dict[str, str] = {}
    for path, kind in sorted(entries.items()):
        if path in made or any(made.get(p, "dir") != "dir" for p in _ancestors(path)):
            continue  # already there, or under a file or symlink
        _tree(world, {path: None if kind == "dir" else ("->/home" if kind == "link" else "content")})
        made.update({ancestor: "dir" for ancestor in _ancestors(path)})
        made[path] = kind
    system = _system(tmp)
    root_plan = plan(str(world), system)
    made_paths = [op[1] for op in root_plan.ops if op[0] in ("dir", "file", "symlink")]
    assert len(made_paths) == len(set(made_paths)), "each path of the root is made once"
    for index, op in enumerate(root_plan.ops):  # a parent is made before its children
        parent = posixpath.dirname(op[1])
        assert parent == "/" or ("dir", parent) in root_plan.ops[:index]
    bound = {op[1] for op in root_plan.ops if op[0] == "world"}
    for path in bound:  # where the system has an entry, the world's never stands (but /tmp, the world's own)
        assert path == "/tmp" or not os.path.lexists(os.path.join(system, path.lstrip("/")))
    shown = bound | {op[1] for op in root_plan.ops if op[0] == "symlink"}
    for path in made:
        world_path = "/" + path
        covered = any(world_path == s or world_path.startswith(s + "/") for s in shown)
        hidden = any(world_path == h or world_path.startswith(h + "/") for h in root_plan.hidden)
        merged = ("dir", world_path) in root_plan.ops
        assert covered or hidden or merged, f"{world_path} is neither shown nor listed as hidden"


def _ancestors(path: str) -> list[str]:
    parts = path.split("/")[:-1]
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]

