"""Where a sandbox's principals share one uid, the files domain decides access as the kernel would.

Differential: the same world (random owners and modes) and the same calls (random principals, tools and
paths) in a sandbox where each principal has its own uid and the kernel decides, and in one whose
principals share one uid (``id_mapping="single-uid"``), where the files domain checks permissions itself.
Every call's status and error code, and the final state (owners included), must agree.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

PRINCIPALS = ["alice", "bob", "carol"]
DIRS = ["/a", "/a/b", "/t"]
FILES = ["/a/f", "/a/b/g", "/t/x", "/h"]
PATHS = [*DIRS, *FILES, "/a/new", "/a/b/new", "/t/new", "/new", "/a/../h", "/a/b/../f"]
DIR_MODES = [0o755, 0o700, 0o750, 0o711, 0o555, 0o1777, 0o1733, 0o000, 0o770, 0o733]
FILE_MODES = [0o644, 0o600, 0o640, 0o666, 0o444, 0o000, 0o620, 0o604]


@pytest.fixture(scope="module")
def runtimes(runtime_opener):
    kernel = runtime_opener("sandbox")
    if kernel.id_mapping == "single-uid":
        kernel.close()
        pytest.skip("no sandbox here gives each principal a uid of its own to compare with")
    shared = runtime_opener("sandbox", id_mapping="single-uid")
    yield kernel, shared
    shared.close()
    kernel.close()


def _entry(kind: str):
    modes = DIR_MODES if kind == "dir" else FILE_MODES
    base = {"dir": True} if kind == "dir" else {"content": "data\n"}
    return st.builds(lambda owner, mode: {**base, "owner": owner, "mode": f"{mode:o}"},
                     st.sampled_from(PRINCIPALS), st.sampled_from(modes))


worlds = st.fixed_dictionaries({
    **{path: _entry("dir") for path in DIRS}, **{path: _entry("file") for path in FILES},
}).map(lambda tree: {"principals": PRINCIPALS, "files": {"workspace": "/a", "tree": tree}})

path = st.sampled_from(PATHS)
calls = st.one_of(
    st.builds(lambda p: ("read_file", {"path": p}), path),
    st.builds(lambda p: ("write_file", {"path": p, "content": "new\n"}), path),
    st.builds(lambda p: ("list_dir", {"path": p}), path),
    st.builds(lambda p, r: ("delete_path", {"path": p, "recursive": r}), path, st.booleans()),
    st.builds(lambda p: ("make_symlink", {"target": "/h", "link_path": p}), path),
    st.builds(lambda s, d: ("move_path", {"src": s, "dst": d}), path, path),
)
scripts = st.lists(st.tuples(st.sampled_from(PRINCIPALS), calls), min_size=1, max_size=8)


def _play(runtime, world, script) -> tuple[list[tuple], dict[str, str]]:
    handle = runtime.open_world(world, "real")
    try:
        seen = []
        for principal, (tool, params) in script:
            outcome = handle.call({"tool": tool, "params": params, "principal": principal})
            seen.append((principal, tool, params, outcome["status"], outcome.get("error_code")))
        return seen, handle.snapshot()
    finally:
        handle.close()


def _world(**owners_modes) -> dict:
    tree = {path: {"dir": True, "owner": "alice", "mode": "755"} for path in DIRS}
    tree |= {path: {"content": "data\n", "owner": "alice", "mode": "644"} for path in FILES}
    for path, (owner, mode) in owners_modes.items():
        tree["/" + path] = {**tree["/" + path], "owner": owner, "mode": mode}
    return {"principals": PRINCIPALS, "files": {"workspace": "/a", "tree": tree}}


@settings(max_examples=60)
@given(world=worlds, script=scripts)
# A directory the mover may not write, moved onto a file (or a file onto a directory): the kernel answers
# ENOTDIR (EISDIR) before it checks the directory's own write permission.
@example(world=_world(t=("bob", "755")), script=[("alice", ("move_path", {"src": "/t", "dst": "/a/f"}))])
@example(world=_world(t=("bob", "755")), script=[("alice", ("move_path", {"src": "/h", "dst": "/t"}))])
def test_the_files_domain_decides_access_as_the_kernel_does(runtimes, world, script):
    kernel, shared = runtimes
    expected, expected_state = _play(kernel, world, script)
    got, state = _play(shared, world, script)
    assert got == expected
    assert state == expected_state


def test_a_principal_cannot_touch_another_principals_file(runtimes):
    _, shared = runtimes
    world = {"principals": ["alice", "bob"], "files": {"tree": {
        "/home/bob/": {"dir": True, "owner": "bob", "mode": "0700"},
        "/home/bob/key": {"content": "bob's key\n", "owner": "bob", "mode": "0600"},
        "/srv/notes": {"content": "bob's notes\n", "owner": "bob", "mode": "0644"},
    }}}
    handle = shared.open_world(world, "real")
    try:
        def call(tool, principal, **params):
            outcome = handle.call({"tool": tool, "params": params, "principal": principal})
            return outcome["status"], outcome.get("error_code")

        assert call("read_file", "alice", path="/home/bob/key") == ("error", "EACCES")
        assert call("list_dir", "alice", path="/home/bob") == ("error", "EACCES")
        assert call("write_file", "alice", path="/srv/notes", content="mine") == ("error", "EACCES")
        assert call("read_file", "alice", path="/srv/notes") == ("ok", None)
        assert call("read_file", "bob", path="/home/bob/key") == ("ok", None)
        assert call("write_file", "bob", path="/home/bob/new", content="x") == ("ok", None)
        assert "files:/home/bob/new" in handle.snapshot()
        assert handle.snapshot()["files:/home/bob/new"].split()[2] == "uid=10002"  # bob's, as bob made it
    finally:
        handle.close()
