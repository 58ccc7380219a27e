"""Runtimes under test. A runtime that cannot run here is skipped with its reason — except Docker when
LITMUS_REQUIRE_DOCKER=1 (as in CI), where a missing engine is a failure, never a silent skip.

When no Docker engine answers but Debian's ``dockerd`` is installed and we are root, the first test that
asks for the docker runtime starts one (no bridge, no iptables: worlds have no network) and the session
stops it at the end; the session also fails if any container it labelled is still there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from litmus_replay.envs import RuntimeUnavailable
from litmus_replay.envs.runtime import Runtime, get_runtime, runtime_names

ISOLATED_RUNTIMES = ("sandbox", "docker")
HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config, items):
    """Every test here starts real runtimes, a browser or accounts: all are ``slow`` (``-m "not slow"``
    leaves them out while working; CI runs them)."""
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.slow)
ALL_RUNTIMES = ("inprocess", *ISOLATED_RUNTIMES)


def require_docker() -> bool:
    return os.environ.get("LITMUS_REQUIRE_DOCKER") == "1"


_dockerd: subprocess.Popen | None = None
_dockerd_log: str | None = None


def _engine_answers() -> bool:
    from litmus_replay.envs.runtimes.docker import Engine

    try:
        Engine.connect(timeout=5).close()
    except RuntimeUnavailable:
        return False
    return True


def ensure_dockerd(timeout: float = 60.0) -> None:
    """Start dockerd for this session if none answers and we can (root, dockerd installed, no DOCKER_HOST)."""
    global _dockerd, _dockerd_log
    if _dockerd is not None or _engine_answers():
        return
    dockerd = shutil.which("dockerd")
    if dockerd is None or os.geteuid() != 0 or os.environ.get("DOCKER_HOST"):
        return
    fd, _dockerd_log = tempfile.mkstemp(prefix="litmus-dockerd-", suffix=".log")
    with os.fdopen(fd, "wb") as log:
        _dockerd = subprocess.Popen([dockerd, "--bridge=none", "--iptables=false"], stdin=subprocess.DEVNULL,
                                    stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _dockerd.poll() is None and not _engine_answers():
        time.sleep(0.2)


def _stop_dockerd() -> None:
    global _dockerd
    if _dockerd is None:
        return
    _dockerd.terminate()
    try:
        _dockerd.wait(timeout=30)
    except subprocess.TimeoutExpired:
        _dockerd.kill()
        _dockerd.wait()
    _dockerd = None
    if _dockerd_log:
        os.unlink(_dockerd_log)


def leftover_containers(pid: int | None = None) -> list[str]:
    """Names of labelled containers still there (of one owner pid, or of any)."""
    from litmus_replay.envs.runtimes.docker import OWNER, Engine

    try:
        engine = Engine.connect(timeout=5)
    except RuntimeUnavailable:
        return []
    try:
        return [c.name for c in engine.labelled(**{OWNER: "" if pid is None else str(pid)})]
    finally:
        engine.close()


@pytest.fixture(scope="session", autouse=True)
def _docker_session():
    """Stop the dockerd this session started; fail the session if it left a labelled container."""
    yield
    try:
        used = "litmus_replay.envs.runtimes.docker" in sys.modules  # no docker test ran: nothing to check
        left = leftover_containers(os.getpid()) if used else []
        if left:
            from litmus_replay.envs.runtimes.docker import Engine

            engine = Engine.connect()
            for name in left:
                engine.remove(name)
            engine.close()
            pytest.fail(f"the test session left docker containers behind: {', '.join(left)}")
    finally:
        _stop_dockerd()


def expected_id_mapping() -> str | None:
    """The sandbox's id mapping a run as an unprivileged account must get (``subordinate``, ``single-uid``):
    set by the tests that rerun these modules as such an account, where a skip would hide a failure."""
    return os.environ.get("LITMUS_EXPECT_ID_MAPPING") or None


def open_runtime(name: str, **options) -> Runtime:
    """Instantiate a runtime or skip (fail, for Docker under LITMUS_REQUIRE_DOCKER=1, and for the sandbox
    when LITMUS_EXPECT_ID_MAPPING names its mode) with the reason."""
    expected = expected_id_mapping() if name == "sandbox" else None
    if expected is not None:
        try:
            runtime = get_runtime(name, **options)
        except RuntimeUnavailable as exc:
            pytest.fail(f"LITMUS_EXPECT_ID_MAPPING={expected} but the sandbox is unavailable: {exc}")
        if runtime.id_mapping != expected:
            runtime.close()
            pytest.fail(f"LITMUS_EXPECT_ID_MAPPING={expected} but the sandbox maps ids as {runtime.id_mapping}")
        return runtime
    must = name == "docker" and require_docker()
    if name == "docker" and name in runtime_names():
        ensure_dockerd()
    if name not in runtime_names():
        (pytest.fail if must else pytest.skip)(f"runtime {name!r} is not registered")
    try:
        return get_runtime(name, **options)
    except RuntimeUnavailable as exc:
        if must:
            pytest.fail(f"LITMUS_REQUIRE_DOCKER=1 but the docker runtime is unavailable: {exc}")
        pytest.skip(f"runtime {name!r} unavailable here: {exc}")


@pytest.fixture(scope="session")
def runtime_opener():
    """:func:`open_runtime`, for test modules (conftest is not importable by name)."""
    return open_runtime


@pytest.fixture(scope="session")
def docker_leftovers():
    """:func:`leftover_containers`, for test modules."""
    return leftover_containers


@pytest.fixture(scope="module", params=ISOLATED_RUNTIMES)
def isolated_runtime(request):
    """Each isolated runtime in turn, shared by a test module and closed after it."""
    runtime = open_runtime(request.param)
    yield runtime
    runtime.close()


@pytest.fixture(scope="module", params=ALL_RUNTIMES)
def any_runtime(request):
    runtime = open_runtime(request.param)
    yield runtime
    runtime.close()
