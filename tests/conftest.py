"""Suite-wide settings: no timing-based failures (the machine may be busy), Docker policy, shared paths."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"
TICKETS = ROOT / "examples" / "tickets"  # the example plug-in distribution

# Timing is measured by benchmarks/, never asserted by tests: a loaded CI machine must not fail a property.
settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")


@pytest.fixture()
def bare_envs(tmp_path) -> Path:
    """A directory holding only a copy of ``litmus_replay/envs``: put on ``PYTHONPATH`` under ``-S``, it is
    what an isolated runtime's server sees (no site-packages, no distribution metadata, no msgspec)."""
    import shutil

    import litmus_replay.envs as envs

    shutil.copytree(Path(envs.__file__).parent, tmp_path / "litmus_replay" / "envs",
                    ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


@pytest.fixture()
def env_server():
    """Start env servers (``python -m litmus_replay.envs.server --stdio``) and end each as a user would:
    end of input, so it removes the world directory it made (a killed server cannot)."""
    started: list[subprocess.Popen] = []

    def start() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "litmus_replay.envs.server", "--stdio"],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        started.append(proc)
        return proc

    yield start
    for proc in started:
        proc.stdin.close()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()


@pytest.fixture(scope="session")
def tickets_plugin() -> Path:
    """The example plug-in distribution, installed into this environment with pip as a user installs it (its
    own package, found through its entry point), from the current source."""
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--force-reinstall", "--disable-pip-version-check", str(TICKETS)], check=True)
    importlib.invalidate_caches()
    from litmus_replay.envs.domain import refresh_plugins

    refresh_plugins()
    return TICKETS
