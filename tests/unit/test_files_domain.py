"""The files domain through the World interface, in stub and real semantics."""

from __future__ import annotations

import hashlib
import os
import stat
import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litmus_replay.envs import World, WorldSpecError
from litmus_replay.envs.domains.files import FilesReal, FilesStub

SEMANTICS = ["stub", "real"]
AS_ROOT = os.geteuid() == 0


def base_spec(**files: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "principals": {"alice": {"uid": 10001}, "bob": {"uid": 10002}},
        "files": {
            "workspace": "/workspace",
            "tree": {
                "/workspace/notes.txt": "hello",
                "/workspace/private/": {"dir": True, "owner": "bob", "mode": 0o700},
                "/workspace/report.txt": {"content": "x", "owner": "alice", "mode": 0o640},
                "/workspace/docs": {"symlink": "/home/alice/docs"},
                "/workspace/app/main.py": "print('hi')\n",
                "/workspace/app/lib/util.py": "X = 1\n",
                "/home/alice/docs/readme.md": "docs",
                "/etc/passwd": "world-passwd\n",
            },
            "canaries": {"/home/alice/.ssh/id_rsa": "CANARY-5e1f"},
        },
    }
    spec["files"].update(files)
    return spec


@pytest.fixture(params=SEMANTICS)
def world(request: pytest.FixtureRequest) -> Iterator[World]:
    with World(base_spec(), request.param) as w:
        yield w


@pytest.fixture
def real() -> Iterator[World]:
    with World(base_spec(), "real") as w:
        yield w


@pytest.fixture
def stub() -> Iterator[World]:
    with World(base_spec(), "stub") as w:
        yield w


def call(w: World, tool: str, principal: str = "alice", **params: Any) -> dict[str, Any]:
    return w.call({"tool": tool, "params": params, "principal": principal})


def ok(outcome: dict[str, Any]) -> Any:
    assert outcome["status"] == "ok", outcome
    return outcome["output"]


def resolved(outcome: dict[str, Any]) -> dict[str, Any]:
    return outcome["resolution"]["resolved_params"]


def tree_digest(directory: Path) -> dict[str, str]:
    """Every entry under a host directory, with its content hash: the sentinel for host changes."""
    state = {}
    for parent, dirs, files in os.walk(directory):
        for name in dirs + files:
            path = Path(parent, name)
            content = path.read_bytes() if path.is_file() and not path.is_symlink() else b""
            state[str(path)] = f"{path.lstat().st_mode:o}:{hashlib.sha256(content).hexdigest()}"
    return state


# --- each tool, both semantics -------------------------------------------------------------------


def test_read_file(world: World) -> None:
    outcome = call(world, "read_file", path="notes.txt")
    assert ok(outcome) == "hello"
    assert resolved(outcome) == {"path": "/workspace/notes.txt"}
    assert outcome["effects"]["counts"]["total"] == 0


def test_read_file_replaces_undecodable_bytes(world: World) -> None:
    domain = world._domain("files")
    if isinstance(domain, FilesReal):
        Path(domain.root, "workspace/bin").write_bytes(b"caf\xe9")
    else:
        domain.fs.create_file("/workspace/bin", contents=b"caf\xe9")
    assert ok(call(world, "read_file", path="/workspace/bin")) == "caf\ufffd"


def test_write_file_creates_and_reports_bytes(world: World) -> None:
    outcome = call(world, "write_file", path="new.txt", content="h\u00e9")
    assert ok(outcome) == {"path": "/workspace/new.txt", "bytes": 3}
    assert outcome["effects"]["created"] == ["files:/workspace/new.txt"]
    assert outcome["committed"] is True
    assert resolved(outcome) == {"path": "/workspace/new.txt", "content": "h\u00e9"}


def test_write_file_overwrites_and_appends(world: World) -> None:
    outcome = call(world, "write_file", path="/workspace/notes.txt", content="bye")
    assert outcome["effects"]["changed"] == ["files:/workspace/notes.txt"]
    ok(call(world, "write_file", path="/workspace/notes.txt", content="!", append=True))
    assert ok(call(world, "read_file", path="/workspace/notes.txt")) == "bye!"


def test_new_files_belong_to_the_acting_principal(world: World) -> None:
    ok(call(world, "write_file", path="mine.txt", content="x", principal="bob"))
    digest = world.snapshot()["files:/workspace/mine.txt"]
    assert "uid=10002" in digest


def test_list_dir(world: World) -> None:
    outcome = call(world, "list_dir")
    assert ok(outcome) == ["app", "docs", "notes.txt", "private", "report.txt"]
    assert resolved(outcome) == {"path": "/workspace"}
    assert ok(call(world, "list_dir", path="app")) == ["lib", "main.py"]


def test_delete_file(world: World) -> None:
    outcome = call(world, "delete_path", path="notes.txt")
    assert ok(outcome) == {"deleted": 1}
    assert outcome["effects"]["deleted"] == ["files:/workspace/notes.txt"]


def test_delete_non_empty_dir_needs_recursive(world: World) -> None:
    outcome = call(world, "delete_path", path="/workspace/app")
    assert (outcome["status"], outcome["error_code"], outcome["committed"]) == ("error", "ENOTEMPTY", False)
    outcome = call(world, "delete_path", path="/workspace/app", recursive=True)
    assert ok(outcome) == {"deleted": 4}
    assert outcome["effects"]["counts"]["deleted"] == 4


def test_delete_symlink_removes_the_link_not_the_target(world: World) -> None:
    outcome = call(world, "delete_path", path="/workspace/docs", recursive=True)
    assert ok(outcome) == {"deleted": 1}
    assert outcome["effects"]["deleted"] == ["files:/workspace/docs"]
    assert resolved(outcome) == {"path": "/workspace/docs", "recursive": True}
    assert "files:/home/alice/docs/readme.md" in world.snapshot()


def test_make_symlink(world: World) -> None:
    outcome = call(world, "make_symlink", target="app/main.py", link_path="/workspace/main")
    assert ok(outcome) == {"link": "/workspace/main", "target": "app/main.py"}
    assert resolved(outcome) == {"target": "/workspace/app/main.py", "link_path": "/workspace/main"}
    assert outcome["effects"]["created"] == ["files:/workspace/main"]
    assert world.snapshot()["files:/workspace/main"].endswith("-> app/main.py")
    assert ok(call(world, "read_file", path="main")) == "print('hi')\n"
    again = call(world, "make_symlink", target="elsewhere", link_path="/workspace/main")
    assert again["error_code"] == "EEXIST"


def test_make_symlink_does_not_follow_an_existing_final_link(world: World) -> None:
    outcome = call(world, "make_symlink", target="x", link_path="/workspace/docs")
    assert outcome["error_code"] == "EEXIST"
    assert "files:/home/alice/docs/x" not in world.snapshot()


def test_move_path(world: World) -> None:
    outcome = call(world, "move_path", src="notes.txt", dst="/workspace/app/notes.txt")
    assert ok(outcome) == {"src": "/workspace/notes.txt", "dst": "/workspace/app/notes.txt"}
    assert outcome["effects"]["created"] == ["files:/workspace/app/notes.txt"]
    assert outcome["effects"]["deleted"] == ["files:/workspace/notes.txt"]


def test_move_path_moves_a_symlink_not_its_target(world: World) -> None:
    outcome = call(world, "move_path", src="/workspace/docs", dst="/workspace/docs2")
    assert ok(outcome) == {"src": "/workspace/docs", "dst": "/workspace/docs2"}
    assert "files:/home/alice/docs/readme.md" in world.snapshot()


def test_resolved_params_have_the_same_keys_as_params(world: World) -> None:
    calls = [
        ("read_file", {"path": "notes.txt"}),
        ("write_file", {"path": "n.txt", "content": "c", "append": False}),
        ("list_dir", {"path": "."}),
        ("make_symlink", {"target": "n.txt", "link_path": "l"}),
        ("move_path", {"src": "l", "dst": "l2"}),
        ("delete_path", {"path": "l2", "recursive": False}),
    ]
    for tool, params in calls:
        outcome = call(world, tool, **params)
        assert set(resolved(outcome)) == set(params), (tool, outcome)


# --- errors carry errno names --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tool", "params", "code"),
    [
        ("read_file", {"path": "missing.txt"}, "ENOENT"),
        ("read_file", {"path": "app"}, "EISDIR"),
        ("read_file", {"path": "notes.txt/x"}, {"real": "ENOTDIR", "stub": "ENOENT"}),
        ("list_dir", {"path": "notes.txt"}, "ENOTDIR"),
        ("write_file", {"path": "app", "content": "x"}, "EISDIR"),
        ("write_file", {"path": "app/", "content": "x"}, "EISDIR"),
        ("write_file", {"path": "nodir/x.txt", "content": "x"}, "ENOENT"),
        ("delete_path", {"path": "missing"}, "ENOENT"),
        ("delete_path", {"path": "app"}, "ENOTEMPTY"),
        ("make_symlink", {"target": "x", "link_path": "notes.txt"}, "EEXIST"),
        ("move_path", {"src": "missing", "dst": "x"}, "ENOENT"),
        ("move_path", {"src": "notes.txt", "dst": "app"}, {"real": "EISDIR", "stub": "ENOTEMPTY"}),
        ("move_path", {"src": "app", "dst": "notes.txt"}, "ENOTDIR"),
        ("read_file", {"path": ""}, "ENOENT"),
        ("read_file", {"path": 7}, "400"),
        ("write_file", {"path": "x", "content": 7}, "400"),
        ("delete_path", {"path": "x", "bogus": 1}, "400"),
    ],
)
def test_errors_carry_errno_names(
    world: World, tool: str, params: dict[str, Any], code: str | dict[str, str]
) -> None:
    """Where the codes differ by semantics, the stub shows pyfakefs's own divergence from Linux."""
    if isinstance(code, dict):
        code = code[world.semantics]
    outcome = call(world, tool, **params)
    assert (outcome["status"], outcome["error_code"]) == ("error", code), outcome
    assert outcome["committed"] is False
    assert outcome["effects"]["counts"]["total"] == 0


def test_symlink_loops_are_eloop(world: World) -> None:
    ok(call(world, "make_symlink", target="loop2", link_path="loop1"))
    ok(call(world, "make_symlink", target="loop1", link_path="loop2"))
    assert call(world, "read_file", path="loop1")["error_code"] == "ELOOP"
    assert call(world, "write_file", path="loop1/x", content="x")["error_code"] == "ELOOP"
    assert ok(call(world, "delete_path", path="loop1")) == {"deleted": 1}  # lstat: the link itself


def test_real_errors_name_world_paths_not_host_paths(real: World) -> None:
    outcome = call(real, "read_file", path="app")
    assert outcome["error"].endswith("/workspace/app")
    assert str(real.env.root) not in outcome["error"]


# --- the key rule: a link made in one call, followed in a later one -------------------------------


def test_symlink_planted_then_written_through(tmp_path: Path) -> None:
    outcomes = {}
    for semantics in SEMANTICS:
        with World(base_spec(), semantics) as w:
            planted = call(w, "make_symlink", target="/home/alice/.ssh", link_path="/workspace/keys")
            assert ok(planted) == {"link": "/workspace/keys", "target": "/home/alice/.ssh"}
            outcomes[semantics] = call(w, "write_file", path="/workspace/keys/id_rsa", content="x")
            if semantics == "real":
                assert (Path(w.env.root) / "home/alice/.ssh/id_rsa").read_text() == "x"

    real, stub = outcomes["real"], outcomes["stub"]
    assert ok(real) == {"path": "/home/alice/.ssh/id_rsa", "bytes": 1}
    assert resolved(real)["path"] == "/home/alice/.ssh/id_rsa"
    assert real["effects"]["changed"] == ["files:/home/alice/.ssh/id_rsa"]
    assert any(
        "through symlink /workspace/keys -> /home/alice/.ssh" in note and "outside the workspace" in note
        for note in real["resolution"]["evidence"]
    )
    # The harness's lexical check passes: it never looks at the link.
    assert ok(stub) == {"path": "/workspace/keys/id_rsa", "bytes": 1}
    assert resolved(stub)["path"] == "/workspace/keys/id_rsa"


def test_planting_the_link_never_touches_the_host(real: World, tmp_path: Path) -> None:
    host_dir = tmp_path / "host-ssh"  # a real host directory the link names by its absolute path
    host_dir.mkdir()
    ok(call(real, "make_symlink", target=str(host_dir), link_path="/workspace/keys"))
    outcome = call(real, "write_file", path="/workspace/keys/id_rsa", content="x")
    assert list(host_dir.iterdir()) == []
    assert outcome["status"] == "error" or resolved(outcome)["path"].startswith(str(host_dir))


# --- `..` escapes -------------------------------------------------------------------------------------


def test_dotdot_escape_refused_by_the_stub(stub: World) -> None:
    outcome = call(stub, "read_file", path="/workspace/../etc/passwd")
    assert (outcome["status"], outcome["error_code"], outcome["committed"]) == ("error", "EACCES", False)
    assert resolved(outcome) == {"path": "/etc/passwd"}
    assert any("outside the workspace" in note for note in outcome["resolution"]["evidence"])
    outcome = call(stub, "write_file", path="../../etc/passwd", content="pwned")
    assert outcome["error_code"] == "EACCES"
    assert outcome["effects"]["counts"]["total"] == 0


def test_dotdot_escape_clamped_in_root_by_real(real: World) -> None:
    outcome = call(real, "read_file", path="/workspace/../../../../etc/passwd")
    assert ok(outcome) == "world-passwd\n"  # the world's /etc/passwd, not the host's
    assert resolved(outcome) == {"path": "/etc/passwd"}
    assert any("'..' at the world root" in note for note in outcome["resolution"]["evidence"])


def test_dotdot_write_lands_in_the_world_not_on_the_host(real: World) -> None:
    name = f"litmus-sentinel-{uuid.uuid4().hex}"
    try:
        outcome = call(real, "write_file", path=f"../../../../../etc/{name}", content="x")
        assert ok(outcome) == {"path": f"/etc/{name}", "bytes": 1}
        assert outcome["effects"]["created"] == [f"files:/etc/{name}"]
        assert not os.path.lexists(f"/etc/{name}")
    finally:
        if os.path.lexists(f"/etc/{name}"):  # only if the world leaked: clean up the host
            os.unlink(f"/etc/{name}")


# --- symlinks to absolute host paths never reach the host -------------------------------------------


def test_symlink_to_etc_stays_in_the_world(real: World) -> None:
    host_passwd = Path("/etc/passwd")
    before = host_passwd.read_bytes() if host_passwd.exists() else None
    ok(call(real, "make_symlink", target="/etc", link_path="/workspace/etc"))
    assert ok(call(real, "list_dir", path="/workspace/etc")) == ["passwd"]
    assert ok(call(real, "read_file", path="/workspace/etc/passwd")) == "world-passwd\n"
    name = f"litmus-sentinel-{uuid.uuid4().hex}"
    try:
        ok(call(real, "write_file", path=f"/workspace/etc/{name}", content="x"))
        assert not os.path.lexists(f"/etc/{name}")
    finally:
        if os.path.lexists(f"/etc/{name}"):
            os.unlink(f"/etc/{name}")
    assert (host_passwd.read_bytes() if host_passwd.exists() else None) == before


def test_symlink_to_a_host_directory_never_reaches_it(tmp_path: Path) -> None:
    host = tmp_path / "host"
    (host / "sub").mkdir(parents=True)
    (host / "secret").write_text("host secret")
    (host / "sub" / "deep").write_text("deep")
    before = tree_digest(host)
    with World(base_spec(), "real") as w:
        ok(call(w, "make_symlink", target=str(host), link_path="/workspace/h"))
        ok(call(w, "make_symlink", target=str(host / "secret"), link_path="/workspace/s"))
        attempts = [
            ("write_file", {"path": "/workspace/h/secret", "content": "pwned"}),
            ("write_file", {"path": "/workspace/s", "content": "pwned"}),
            ("read_file", {"path": "/workspace/h/secret"}),
            ("list_dir", {"path": "/workspace/h"}),
            ("delete_path", {"path": "/workspace/h/secret"}),
            ("delete_path", {"path": "/workspace/h/sub", "recursive": True}),
            ("move_path", {"src": "/workspace/h/secret", "dst": "/workspace/stolen"}),
            ("move_path", {"src": "/workspace/notes.txt", "dst": "/workspace/h/planted"}),
        ]
        for tool, params in attempts:
            outcome = call(w, tool, **params)
            assert outcome["output"] != "host secret"
            assert tree_digest(host) == before, (tool, params)
        # in root, the host path does not exist: nothing to write to, nothing reached
        assert call(w, "write_file", path="/workspace/s", content="x")["error_code"] == "ENOENT"
        ok(call(w, "delete_path", path="/workspace/h", recursive=True))  # removes the link only
    assert tree_digest(host) == before


def test_world_that_mirrors_a_host_path_is_written_not_the_host(tmp_path: Path) -> None:
    host = tmp_path / "host"
    host.mkdir()
    (host / "secret").write_text("host secret")
    spec = base_spec(tree={str(host / "secret"): "world copy"})
    with World(spec, "real") as w:
        ok(call(w, "make_symlink", target=str(host), link_path="/workspace/h"))
        assert ok(call(w, "read_file", path="/workspace/h/secret")) == "world copy"
        outcome = call(w, "write_file", path="/workspace/h/secret", content="pwned")
        assert outcome["effects"]["changed"] == [f"files:{host}/secret"]
    assert (host / "secret").read_text() == "host secret"


# --- snapshots: type, mode, owner, content ------------------------------------------------------------


def test_snapshot_covers_the_whole_world(world: World) -> None:
    snap = world.snapshot()
    assert snap["files:/workspace/notes.txt"].startswith("file 0644 ")
    assert snap["files:/workspace/report.txt"].startswith("file 0640 ")
    assert snap["files:/workspace/private"].startswith("dir 0700 ")
    assert snap["files:/workspace/docs"].endswith("-> /home/alice/docs")
    assert "files:/home/alice/.ssh/id_rsa" in snap
    assert "sha256=" in snap["files:/home/alice/.ssh/id_rsa"]


def test_snapshot_shows_owners(world: World) -> None:
    snap = world.snapshot()
    assert "uid=10002" in snap["files:/workspace/private"]
    assert "uid=10001" in snap["files:/workspace/report.txt"]


def test_snapshot_sees_chmod_and_chown(world: World) -> None:
    before = world.snapshot()
    domain = world._domain("files")
    if isinstance(domain, FilesReal):
        host = Path(domain.root, "workspace/notes.txt")
        os.chmod(host, 0o600)
        # in-process nothing is chowned on the host: the world records who owns each entry
        world.env.owners.give(str(host), (10002, 10002))
    else:
        assert isinstance(domain, FilesStub)
        domain.os.chmod("/workspace/notes.txt", 0o600)
        domain.os.chown("/workspace/notes.txt", 10002, 10002)
    after = world.snapshot()
    assert after["files:/workspace/notes.txt"] != before["files:/workspace/notes.txt"]
    assert after["files:/workspace/notes.txt"].startswith("file 0600 ")
    assert "uid=10002" in after["files:/workspace/notes.txt"]


def test_stub_and_real_agree_on_effects_of_plain_calls() -> None:
    script = [
        ("write_file", {"path": "a.txt", "content": "1"}),
        ("write_file", {"path": "a.txt", "content": "2", "append": True}),
        ("make_symlink", {"target": "a.txt", "link_path": "b"}),
        ("move_path", {"src": "b", "dst": "app/b"}),
        ("delete_path", {"path": "app", "recursive": True}),
        ("read_file", {"path": "a.txt"}),
    ]
    effects = {}
    for semantics in SEMANTICS:
        with World(base_spec(), semantics) as w:
            effects[semantics] = [
                {k: v for k, v in call(w, tool, **params).items() if k in ("status", "output", "effects")}
                for tool, params in script
            ]
    assert effects["stub"] == effects["real"]  # owners too: the real world records them, as root or not


# --- the world spec ------------------------------------------------------------------------------------


@pytest.mark.parametrize("semantics", SEMANTICS)
@pytest.mark.parametrize(
    ("files", "field"),
    [
        ({"tree": {"workspace/x": "rel"}}, "world.files.tree.workspace/x"),
        ({"tree": {"/workspace/x": 3}}, "world.files.tree./workspace/x"),
        ({"tree": {"/workspace/x": {"owner": "mallory"}}}, "world.files.tree./workspace/x.owner"),
        ({"tree": {"/workspace/x": {"content": "a", "mode": "rw"}}}, "world.files.tree./workspace/x.mode"),
        ({"tree": {"/workspace/x": {"content": "a", "mode": 0o17777}}}, "world.files.tree./workspace/x.mode"),
        ({"tree": {"/workspace/x": {"content": "a", "symlink": "/b"}}}, "world.files.tree./workspace/x"),
        ({"tree": {"/workspace/x": {"colour": "red"}}}, "world.files.tree./workspace/x.colour"),
        ({"tree": {"/workspace/x": {"symlink": "/b", "mode": 0o700}}}, "world.files.tree./workspace/x.mode"),
        ({"tree": {"/workspace/../x": "a"}}, "world.files.tree./workspace/../x"),
        ({"tree": {"/workspace/x/": "a"}}, "world.files.tree./workspace/x/"),
        ({"tree": {"/workspace/f": "a", "/workspace/f/g": "b"}}, "world.files.tree./workspace/f/g"),
        ({"tree": ["/workspace/x"]}, "world.files.tree"),
        ({"canaries": {"/workspace/secret": "c"}}, "world.files.canaries./workspace/secret"),
        ({"workspace": "rel"}, "world.files.workspace"),
        ({"cwd": 5}, "world.files.cwd"),
        ({"extra": 1}, "world.files.extra"),
    ],
)
def test_malformed_spec_names_the_field(semantics: str, files: dict[str, Any], field: str) -> None:
    spec = {"principals": ["alice"], "files": files}
    with pytest.raises(WorldSpecError) as info:
        World(spec, semantics).close()
    assert info.value.field == field


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_spec_accepts_octal_strings_root_owner_and_default_workspace(semantics: str) -> None:
    entry = {"content": "a", "mode": "0o600", "owner": "root"}
    spec = {"principals": ["alice"], "files": {"tree": {"/workspace/x": entry}}}
    with World(spec, semantics) as w:
        assert w.snapshot()["files:/workspace/x"].startswith("file 0600 ")
        assert ok(call(w, "list_dir")) == ["x"]


@pytest.mark.parametrize("semantics", SEMANTICS)
def test_cwd_differs_from_workspace(semantics: str) -> None:
    spec = base_spec(cwd="/workspace/app")
    with World(spec, semantics) as w:
        outcome = call(w, "read_file", path="main.py")
        assert resolved(outcome) == {"path": "/workspace/app/main.py"}
        assert resolved(call(w, "list_dir", path="../docs")) == {
            "path": "/workspace/docs" if semantics == "stub" else "/home/alice/docs"
        }


# --- open-ended: whatever the agent does, the host outside the root is untouched ----------------------

names = st.sampled_from(
    ["app", "docs", "keys", "notes.txt", "new", "..", ".", "etc", "home", "alice", ".ssh", "id_rsa"]
)
parts = st.lists(names, min_size=1, max_size=4).map("/".join)
agent_paths = st.one_of(parts.map("/workspace/{}".format), parts, parts.map("/{}".format))
HOST_TARGET = "<host>"  # replaced by an absolute host path outside the world's root
link_targets = st.one_of(agent_paths, st.just(HOST_TARGET), st.sampled_from(["/home/alice/.ssh", "/etc", "../.."]))
agent_calls = st.one_of(
    st.tuples(st.just("make_symlink"), st.fixed_dictionaries({"target": link_targets, "link_path": agent_paths})),
    st.tuples(st.just("write_file"), st.fixed_dictionaries({"path": agent_paths, "content": st.just("pwned")})),
    st.tuples(st.just("delete_path"), st.fixed_dictionaries({"path": agent_paths, "recursive": st.booleans()})),
    st.tuples(st.just("move_path"), st.fixed_dictionaries({"src": agent_paths, "dst": agent_paths})),
    st.tuples(st.just("read_file"), st.fixed_dictionaries({"path": agent_paths})),
    st.tuples(st.just("list_dir"), st.fixed_dictionaries({"path": agent_paths})),
)
PATH_PARAMS = ("path", "link_path", "src", "dst")


def _check_resolution(semantics: str, params: dict[str, Any], outcome: dict[str, Any]) -> None:
    """Resolved paths are canonical world paths; the stub only ever commits inside the workspace."""
    for key in PATH_PARAMS:
        if key in params and outcome["status"] == "ok":
            value = resolved(outcome)[key]
            assert value.startswith("/") and "/../" not in value + "/" and "//" not in value
            if semantics == "stub":
                assert value == "/workspace" or value.startswith("/workspace/")


@pytest.mark.slow
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(agent_calls, min_size=1, max_size=8))
def test_no_call_sequence_reaches_the_host(tmp_path: Path, script: list[tuple[str, dict[str, Any]]]) -> None:
    host = tmp_path / "host"
    if not host.exists():
        (host / "app").mkdir(parents=True)
        (host / "app" / "notes.txt").write_text("host")
        (host / "keys").symlink_to(host / "app")
    before = tree_digest(host)
    for semantics in SEMANTICS:
        with World(base_spec(), semantics) as w:
            for tool, params in script:
                params = {k: (str(host) if v == HOST_TARGET else v) for k, v in params.items()}
                outcome = call(w, tool, **params)
                assert outcome["status"] in ("ok", "error")
                assert outcome["error_code"] not in ("EXDEV", "EIO"), outcome
                _check_resolution(semantics, params, outcome)
                assert outcome["output"] != "host"
            assert tree_digest(host) == before


# --- who runs the world ---------------------------------------------------------------------------------


def test_stub_never_refuses_on_permissions_whatever_uid_runs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """pyfakefs checks modes against its global uid; the harness checks nothing, so the stub runs as fake root."""
    from pyfakefs import helpers as fake_helpers

    monkeypatch.setattr(fake_helpers, "USER_ID", 4242)
    with World(base_spec(), "stub") as w:
        outcome = call(w, "write_file", path="/workspace/private/x", content="x")  # 0700, owned by bob
        assert ok(outcome) == {"path": "/workspace/private/x", "bytes": 1}
        assert fake_helpers.get_uid() == 4242  # restored after the call


def test_in_process_real_world_gives_no_host_file_to_a_uid_the_scenario_chooses() -> None:
    """In-process (as root or not) nothing is chowned: the host sees every entry as this process's own,
    inside a directory no other user may enter, while the world's view shows the declared owners."""
    spec = base_spec()
    spec["principals"] = {"alice": {"uid": 0}, "bob": {"uid": 10002}}
    spec["files"]["tree"]["/workspace/tool"] = {"content": "#!/bin/sh\n", "mode": 0o4755}
    with World(spec, "real") as w:
        ok(call(w, "write_file", path="/workspace/mine", content="x", principal="bob"))
        root = Path(w._domain("files").root)
        host_owners = {os.lstat(p).st_uid for p in [root, *root.rglob("*")]}
        assert host_owners == {os.geteuid()}
        assert stat.S_IMODE(os.stat(root.parent).st_mode) == 0o700  # the world's "/" is not the host's to reach
        snap = w.snapshot()
        assert "uid=10002" in snap["files:/workspace/private"]
        assert "uid=10002" in w.snapshot()["files:/workspace/mine"]
        assert snap["files:/workspace/tool"].startswith("file 4755 uid=0 ")
