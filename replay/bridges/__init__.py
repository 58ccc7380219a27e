"""The replay side of the bridges: world providers for benchmarks that ship their own environments, and
agreement between a replay and the benchmark's own checks."""

from __future__ import annotations

from typing import Any

from ..engine import TrajectoryReplay


def benchmark_checks(result: TrajectoryReplay) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """When a bridge's world reported the benchmark's own checks: those checks, recorded against
    replayed, and the drift (the calls whose answer in the benchmark's environment today departs from
    the recording)."""
    benchmarks = {report.get("benchmark") for report in (result.reports.get("real") or {}).values()
                  if isinstance(report, dict)}
    if "agentdojo" in benchmarks:
        from .agentdojo import agreement, drift

        return agreement(result), drift(result)
    return None
