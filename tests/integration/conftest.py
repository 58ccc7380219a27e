"""Runtimes under test. A runtime that cannot run here is skipped with its reason — except Docker when
LITMUS_REQUIRE_DOCKER=1 (as in CI), where a missing engine is a failure, never a silent skip."""

from __future__ import annotations

import os

import pytest

from litmus_replay.envs import RuntimeUnavailable
from litmus_replay.envs.runtime import Runtime, get_runtime, runtime_names

ISOLATED_RUNTIMES = ("sandbox", "docker")
ALL_RUNTIMES = ("inprocess", *ISOLATED_RUNTIMES)


def require_docker() -> bool:
    return os.environ.get("LITMUS_REQUIRE_DOCKER") == "1"


def open_runtime(name: str, **options) -> Runtime:
    """Instantiate a runtime or skip (fail, for Docker under LITMUS_REQUIRE_DOCKER=1) with the reason."""
    must = name == "docker" and require_docker()
    if name not in runtime_names():
        (pytest.fail if must else pytest.skip)(f"runtime {name!r} is not registered")
    try:
        return get_runtime(name, **options)
    except RuntimeUnavailable as exc:
        if must:
            pytest.fail(f"LITMUS_REQUIRE_DOCKER=1 but the docker runtime is unavailable: {exc}")
        pytest.skip(f"runtime {name!r} unavailable here: {exc}")


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
