"""The in-root path resolver: unit cases, and a property test against the kernel's openat2(RESOLVE_IN_ROOT)."""

from __future__ import annotations

import ctypes
import errno
import os
import posixpath
import stat
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from litmus_replay.envs.rootfs import (
    MAXSYMLINKS,
    ensure_within,
    host_path,
    resolve_in_root,
    trace_in_root,
)

# --- the kernel oracle ---------------------------------------------------------------------------

SYS_OPENAT2 = 437  # the same number on every Linux architecture (syscalls added after 5.1 are unified)
RESOLVE_IN_ROOT = 0x10
O_PATH = getattr(os, "O_PATH", 0o10000000)


class _OpenHow(ctypes.Structure):
    _fields_ = [("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64), ("resolve", ctypes.c_uint64)]


def _openat2(dirfd: int, path: str, flags: int, mode: int = 0) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    how = _OpenHow(flags, mode, RESOLVE_IN_ROOT)
    # openat2(2): with RESOLVE_IN_ROOT, ".." fails with EAGAIN when a rename or mount anywhere on the system
    # raced the lookup, and "the caller should retry". A busy machine does that often enough to matter.
    for _ in range(100):
        fd = libc.syscall(
            ctypes.c_long(SYS_OPENAT2),
            ctypes.c_int(dirfd),
            ctypes.c_char_p(os.fsencode(path)),
            ctypes.byref(how),
            ctypes.c_size_t(ctypes.sizeof(how)),
        )
        if fd >= 0 or ctypes.get_errno() != errno.EAGAIN:
            break
    if fd < 0:
        code = ctypes.get_errno()
        raise OSError(code, os.strerror(code), path)
    return fd


def _openat2_unavailable() -> str | None:
    """Why the oracle cannot run here, or None if it can."""
    if not hasattr(os, "O_PATH") or not os.path.isdir("/proc/self/fd"):
        return "not Linux with /proc: openat2(2) and /proc/self/fd are unavailable"
    with tempfile.TemporaryDirectory() as tmp:
        root = os.open(tmp, os.O_PATH | os.O_DIRECTORY)
        try:
            os.close(_openat2(root, ".", os.O_PATH))
        except OSError as exc:
            return f"openat2(2) is unavailable on this kernel or seccomp profile: {errno.errorcode.get(exc.errno)}"
        finally:
            os.close(root)
    return None


OPENAT2_SKIP = _openat2_unavailable()
needs_openat2 = pytest.mark.skipif(OPENAT2_SKIP is not None, reason=OPENAT2_SKIP or "")


def _world_of(fd: int, real_root: str) -> str:
    try:
        host = os.readlink(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)
    assert host == real_root or host.startswith(real_root + "/"), f"kernel left the root: {host}"
    return host[len(real_root) :] or "/"


def kernel_resolve(real_root: str, path: str, follow_final: bool) -> tuple[str, object]:
    """("ok", world path) or ("err", errno), as openat2(RESOLVE_IN_ROOT) sees it.

    A missing final component is probed by creating it (O_CREAT, then unlinked) so the kernel says
    where it would be created; EISDIR there (a trailing slash on a missing name) reads as ENOENT.
    """
    root_fd = os.open(real_root, os.O_PATH | os.O_DIRECTORY)
    nofollow = 0 if follow_final else os.O_NOFOLLOW
    try:
        try:
            return "ok", _world_of(_openat2(root_fd, path, O_PATH | nofollow | os.O_CLOEXEC), real_root)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                return "err", exc.errno
        try:
            fd = _openat2(root_fd, path, os.O_WRONLY | os.O_CREAT | nofollow | os.O_CLOEXEC, 0o600)
        except OSError as exc:
            return "err", errno.ENOENT if exc.errno == errno.EISDIR else exc.errno
        created = _world_of(fd, real_root)
        os.unlink(host_path(real_root, created))
        return "ok", created
    finally:
        os.close(root_fd)


def kernel_open_for_write(real_root: str, path: str, follow_final: bool) -> tuple[str, object]:
    """Where ``open(path, O_WRONLY|O_CREAT)`` in root lands, or its errno; anything it creates is removed."""
    root_fd = os.open(real_root, os.O_PATH | os.O_DIRECTORY)
    nofollow = 0 if follow_final else os.O_NOFOLLOW
    before = _all_entries(real_root)
    try:
        fd = _openat2(root_fd, path, os.O_WRONLY | os.O_CREAT | nofollow | os.O_CLOEXEC, 0o600)
    except OSError as exc:
        return "err", exc.errno
    finally:
        os.close(root_fd)
    landed = _world_of(fd, real_root)
    if host_path(real_root, landed) not in before:
        os.unlink(host_path(real_root, landed))
    return "ok", landed


def _all_entries(real_root: str) -> set[str]:
    found = {real_root}
    for parent, dirs, files in os.walk(real_root):
        found.update(os.path.join(parent, name) for name in dirs + files)
    return found


def pure_open_for_write(real_root: str, path: str, follow_final: bool, cwd: str = "/") -> tuple[str, object]:
    """The same through the pure resolver in create mode, then the checks the final open would make."""
    try:
        res = trace_in_root(real_root, path, cwd=cwd, follow_final=follow_final, create=True)
    except OSError as exc:
        return "err", exc.errno
    if res.exists:
        mode = os.lstat(host_path(real_root, res.path)).st_mode
        if stat.S_ISDIR(mode):
            return "err", errno.EISDIR
        if stat.S_ISLNK(mode):
            return "err", errno.ELOOP  # O_NOFOLLOW on a final symlink
    return "ok", res.path


def pure_resolve(real_root: str, path: str, follow_final: bool, cwd: str = "/") -> tuple[str, object]:
    try:
        return "ok", resolve_in_root(real_root, path, cwd=cwd, follow_final=follow_final)
    except OSError as exc:
        return "err", exc.errno


# --- unit cases ---------------------------------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A small world: /workspace with a file, a dir, absolute and relative links; /home/alice/docs."""
    (tmp_path / "workspace" / "sub").mkdir(parents=True)
    (tmp_path / "workspace" / "notes.txt").write_text("hello")
    (tmp_path / "home" / "alice" / "docs").mkdir(parents=True)
    (tmp_path / "home" / "alice" / "docs" / "readme").write_text("r")
    (tmp_path / "workspace" / "docs").symlink_to("/home/alice/docs")
    (tmp_path / "workspace" / "up").symlink_to("../home/alice")
    (tmp_path / "workspace" / "escape").symlink_to("../../../../..")
    (tmp_path / "workspace" / "loop1").symlink_to("loop2")
    (tmp_path / "workspace" / "loop2").symlink_to("loop1")
    (tmp_path / "workspace" / "self").symlink_to("self")
    (tmp_path / "workspace" / "dangling").symlink_to("/nowhere/new.txt")
    (tmp_path / "workspace" / "dangling-dir").symlink_to("/nowhere/deeper/x")
    return tmp_path


def _errno(root: Path, path: str, **kwargs: object) -> int | None:
    with pytest.raises(OSError) as info:
        resolve_in_root(root, path, **kwargs)  # type: ignore[arg-type]
    return info.value.errno


def test_plain_paths_resolve_to_themselves(root: Path) -> None:
    assert resolve_in_root(root, "/workspace/notes.txt") == "/workspace/notes.txt"
    assert resolve_in_root(root, "/workspace//sub/./") == "/workspace/sub"
    assert resolve_in_root(root, "/") == "/"


def test_relative_paths_resolve_against_cwd(root: Path) -> None:
    assert resolve_in_root(root, "notes.txt", cwd="/workspace") == "/workspace/notes.txt"
    assert resolve_in_root(root, "../notes.txt", cwd="/workspace/sub") == "/workspace/notes.txt"
    assert resolve_in_root(root, "sub", cwd="workspace") == "/workspace/sub"  # a relative cwd is from /


def test_absolute_symlink_target_is_rerooted(root: Path) -> None:
    res = trace_in_root(root, "/workspace/docs/readme")
    assert res.path == "/home/alice/docs/readme"
    assert res.links == (("/workspace/docs", "/home/alice/docs"),)


def test_relative_symlink_target_is_relative_to_the_link(root: Path) -> None:
    assert resolve_in_root(root, "/workspace/up/docs") == "/home/alice/docs"


def test_dotdot_after_a_symlink_is_physical(root: Path) -> None:
    assert resolve_in_root(root, "/workspace/docs/../x") == "/home/alice/x"


def test_dotdot_at_the_root_stays_at_the_root(root: Path) -> None:
    res = trace_in_root(root, "/../../../home/alice")
    assert (res.path, res.clamped) == ("/home/alice", True)
    assert resolve_in_root(root, "/workspace/escape/workspace") == "/workspace"
    assert trace_in_root(root, "/workspace/../home").clamped is False


def test_loops_are_eloop(root: Path) -> None:
    assert _errno(root, "/workspace/loop1") == errno.ELOOP
    assert _errno(root, "/workspace/self/x") == errno.ELOOP
    assert resolve_in_root(root, "/workspace/self", follow_final=False) == "/workspace/self"


def test_link_budget_is_forty(root: Path) -> None:
    chain = root / "chain"
    chain.mkdir()
    (chain / "l0").write_text("end")
    for i in range(1, MAXSYMLINKS + 2):
        (chain / f"l{i}").symlink_to(f"l{i - 1}")
    assert resolve_in_root(root, f"/chain/l{MAXSYMLINKS}") == "/chain/l0"
    assert _errno(root, f"/chain/l{MAXSYMLINKS + 1}") == errno.ELOOP


def test_missing_final_component_is_allowed_for_creation(root: Path) -> None:
    res = trace_in_root(root, "/workspace/new.txt")
    assert (res.path, res.exists) == ("/workspace/new.txt", False)
    assert trace_in_root(root, "/workspace/notes.txt").exists is True


def test_dangling_final_symlink_leads_to_its_target(root: Path) -> None:
    assert _errno(root, "/workspace/dangling") == errno.ENOENT  # /nowhere is missing: not the final component
    (root / "nowhere").mkdir()
    res = trace_in_root(root, "/workspace/dangling")
    assert (res.path, res.exists) == ("/nowhere/new.txt", False)
    assert resolve_in_root(root, "/workspace/dangling", follow_final=False) == "/workspace/dangling"


def test_missing_intermediate_is_enoent(root: Path) -> None:
    assert _errno(root, "/workspace/missing/x") == errno.ENOENT
    assert _errno(root, "/workspace/missing/") == errno.ENOENT
    assert _errno(root, "/workspace/missing/.") == errno.ENOENT
    assert _errno(root, "/workspace/missing/..") == errno.ENOENT
    assert _errno(root, "/workspace/dangling-dir") == errno.ENOENT


def test_file_used_as_directory_is_enotdir(root: Path) -> None:
    assert _errno(root, "/workspace/notes.txt/x") == errno.ENOTDIR
    assert _errno(root, "/workspace/notes.txt/") == errno.ENOTDIR
    assert _errno(root, "/workspace/notes.txt/..") == errno.ENOTDIR


def test_final_symlink_not_followed_unless_trailing_slash(root: Path) -> None:
    assert resolve_in_root(root, "/workspace/docs", follow_final=False) == "/workspace/docs"
    assert resolve_in_root(root, "/workspace/docs/", follow_final=False) == "/home/alice/docs"
    assert resolve_in_root(root, "/workspace/docs", follow_final=True) == "/home/alice/docs"


def test_create_mode_refuses_a_trailing_slash_on_the_final_name(root: Path) -> None:
    assert _errno(root, "/workspace/new/", create=True) == errno.EISDIR
    assert _errno(root, "/workspace/notes.txt/", create=True) == errno.EISDIR
    assert _errno(root, "/workspace/missing/new/", create=True) == errno.ENOENT
    assert resolve_in_root(root, "/workspace/new", create=True) == "/workspace/new"


def test_bad_paths(root: Path) -> None:
    assert _errno(root, "") == errno.ENOENT
    assert _errno(root, "/work\0space") == errno.EINVAL


def test_ensure_within(root: Path) -> None:
    real = os.path.realpath(root)
    ensure_within(real, real)
    ensure_within(real, os.path.join(real, "workspace", "docs"))  # the final component is not followed
    with pytest.raises(OSError) as info:
        ensure_within(real, os.path.join(real, "workspace", "docs", "readme"))  # parent is a host symlink
    assert info.value.errno == errno.EXDEV
    with pytest.raises(OSError):
        ensure_within(real, os.path.dirname(real) + "/elsewhere")
    with pytest.raises(OSError):
        ensure_within(real, real + "-sibling/x")


@needs_openat2
def test_kernel_agrees_on_the_fixture(root: Path) -> None:
    real = os.path.realpath(root)
    (root / "nowhere").mkdir()
    for path in ["/workspace/docs/readme", "/workspace/escape/home", "/workspace/loop1", "/workspace/dangling",
                 "/workspace/notes.txt/", "/workspace/missing/x", "/../workspace/up/..", "/workspace/docs/"]:
        for follow in (True, False):
            assert pure_resolve(real, path, follow) == kernel_resolve(real, path, follow), (path, follow)


@needs_openat2
def test_kernel_agrees_on_the_link_budget(root: Path) -> None:
    real = os.path.realpath(root)
    chain = root / "chain"
    chain.mkdir()
    (chain / "l0").write_text("end")
    for i in range(1, MAXSYMLINKS + 2):
        (chain / f"l{i}").symlink_to(f"l{i - 1}")
    for i in (MAXSYMLINKS - 1, MAXSYMLINKS, MAXSYMLINKS + 1):
        assert pure_resolve(real, f"/chain/l{i}", True) == kernel_resolve(real, f"/chain/l{i}", True)


# --- property tests -----------------------------------------------------------------------------

NAMES = ["a", "b", "c"]
OUTSIDE = "<outside>"  # placeholder for an absolute host path outside the root


def _join(absolute: bool, parts: list[str], trailing: bool) -> str:
    return ("/" if absolute else "") + "/".join(parts) + ("/" if trailing and parts else "")


def paths(min_parts: int = 0, absolute: bool | None = None) -> st.SearchStrategy[str]:
    """Paths over a tiny alphabet, so they often hit the generated entries; "x" is always missing."""
    component = st.sampled_from([*NAMES, *NAMES, *NAMES, "..", ".", "x", ""])
    return st.builds(
        _join,
        st.booleans() if absolute is None else st.just(absolute),
        st.lists(component, min_size=min_parts, max_size=5),
        st.booleans(),
    )


USUAL_TARGETS = ["/a", "/a/a", "/b", "/", "a", "b/", ".", "..", "../a", "../..", "../../b", "a/a", "../../../a"]
HOST_TARGETS = [OUTSIDE, OUTSIDE + "/a", OUTSIDE + "/../root"]
targets = st.one_of(st.sampled_from(USUAL_TARGETS), paths(min_parts=1), st.sampled_from(HOST_TARGETS))
# Every tree has /a as a directory; each slot below is absent, a dir, a file or (often) a symlink.
SLOTS = ["b", "c", "a/a", "a/b", "a/c", "b/a", "b/b", "a/a/a", "a/a/b"]
slot_kinds = st.one_of(
    st.just(("absent", "")),
    st.just(("dir", "")),
    st.just(("dir", "")),
    st.just(("file", "")),
    st.tuples(st.just("symlink"), targets),
    st.tuples(st.just("symlink"), targets),
    st.tuples(st.just("symlink"), targets),
)
trees = st.fixed_dictionaries({slot: slot_kinds for slot in SLOTS})
# Queries mostly start at a slot (so they meet the generated links) and wander on from there.
queries = st.builds(
    lambda absolute, slot, suffix, trailing: _join(absolute, [*slot.split("/"), *suffix], trailing),
    st.booleans(),
    st.sampled_from(["a", *SLOTS]),
    st.lists(st.sampled_from([*NAMES, "..", ".", "x"]), max_size=2),
    st.booleans(),
)


def _build(root: str, outside: str, tree: dict[str, tuple[str, str]]) -> None:
    """Create the slots whose parent is a real directory (never through a symlink: that could leave)."""
    os.mkdir(os.path.join(root, "a"))
    for slot, (kind, target) in tree.items():
        parent = os.path.join(root, posixpath.dirname(slot))
        if kind == "absent" or not os.path.isdir(parent) or os.path.islink(parent):
            continue
        host = os.path.join(root, slot)
        if kind == "dir":
            os.mkdir(host)
        elif kind == "file":
            Path(host).write_text("f")
        else:
            os.symlink(target.replace(OUTSIDE, outside) or ".", host)


@contextmanager
def _materialised(tree: dict[str, tuple[str, str]]) -> Iterator[tuple[str, str]]:
    """A fresh root built from ``tree`` and a sibling ``outside`` directory holding a host file."""
    with tempfile.TemporaryDirectory() as tmp:
        real_tmp = os.path.realpath(tmp)
        root, outside = os.path.join(real_tmp, "root"), os.path.join(real_tmp, "outside")
        os.mkdir(root)
        os.mkdir(outside)
        Path(outside, "a").write_text("host")
        _build(root, outside, tree)
        yield root, outside


def _snapshot_outside(outside: str) -> list[tuple[str, int, int]]:
    return sorted((p.name, p.lstat().st_mode, p.lstat().st_size) for p in Path(outside).iterdir())


def _check_contained(real_root: str, resolved: str, follow_final: bool) -> None:
    """A resolved path is canonical, inside the root, and only its final component may be a symlink."""
    parts = resolved.split("/")[1:]
    assert resolved.startswith("/") and (resolved == "/" or all(p not in ("", ".", "..") for p in parts))
    ensure_within(real_root, host_path(real_root, resolved))
    for depth in range(1, len(parts)):
        assert stat.S_ISDIR(os.lstat(host_path(real_root, "/" + "/".join(parts[:depth]))).st_mode)
    final = host_path(real_root, resolved)
    if follow_final and os.path.lexists(final):
        assert not os.path.islink(final)


@st.composite
def worlds(draw: st.DrawFn) -> tuple[dict[str, tuple[str, str]], str, str, bool]:
    """A tree, a query path, a cwd and whether the final component is followed."""
    cwd = draw(st.sampled_from(["/", "/", "/a", "/a/a", "/b", "/c"]))
    return draw(trees), draw(st.one_of(queries, paths())), cwd, draw(st.booleans())


@pytest.mark.slow
@needs_openat2
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds())
def test_pure_resolver_matches_openat2_resolve_in_root(world: tuple) -> None:
    tree, path, cwd, follow_final = world
    assume(path != "")
    with _materialised(tree) as (root, outside):
        before = _snapshot_outside(outside)
        joined = path if path.startswith("/") else f"{cwd}/{path}"
        expected = kernel_resolve(root, joined, follow_final)
        event(f"kernel: {expected[0] if expected[0] == 'ok' else errno.errorcode[expected[1]]}")
        assert pure_resolve(root, path, follow_final, cwd=cwd) == expected
        assert _snapshot_outside(outside) == before


@pytest.mark.slow
@needs_openat2
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.sampled_from([False, False, False, True]))
def test_create_mode_matches_openat2_o_creat(world: tuple, trailing_slash: bool) -> None:
    tree, path, cwd, follow_final = world
    assume(path != "")
    if trailing_slash and not path.endswith("/"):
        path += "/"
    with _materialised(tree) as (root, _):
        joined = path if path.startswith("/") else f"{cwd}/{path}"
        expected = kernel_open_for_write(root, joined, follow_final)
        event(f"kernel: {expected[0] if expected[0] == 'ok' else errno.errorcode[expected[1]]}")
        assert pure_open_for_write(root, path, follow_final, cwd=cwd) == expected


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(worlds())
def test_resolution_never_leaves_the_root(world: tuple) -> None:
    tree, path, cwd, follow_final = world
    with _materialised(tree) as (root, outside):
        before = _snapshot_outside(outside)
        try:
            res = trace_in_root(root, path, cwd=cwd, follow_final=follow_final)
        except OSError as exc:
            assert exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP)
            return
        event(f"links followed: {bool(res.links)}, clamped: {res.clamped}")
        _check_contained(root, res.path, follow_final)
        assert res.exists == os.path.lexists(host_path(root, res.path))
        assert _snapshot_outside(outside) == before
