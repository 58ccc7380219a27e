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
