"""Suite-wide settings: no timing-based failures (the machine may be busy), Docker policy, shared paths."""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, settings

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "scenarios"

# Timing is measured by benchmarks/, never asserted by tests: a loaded CI machine must not fail a property.
settings.register_profile("default", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("default")
