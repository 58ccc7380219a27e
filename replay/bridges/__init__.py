"""The replay side of the bridges: what a world provider offers beyond its worlds, asked for by seam,
never by a benchmark's name.

A bridge is a world provider (a ``litmus_replay.worlds`` entry point, see :class:`..worlds.WorldProvider`)
whose class may also define, as static or class methods:

- ``benchmark_checks(replay) -> (checks, drift) | None``: the benchmark's own checks of a run its world
  served, recorded against replayed, and the calls whose answers today depart from the recording. A
  world says which bridge served it by the ``benchmark`` its final report names (the provider's name).
- ``known_versions() -> list[str]``: the benchmark versions ``revalidate --benchmark-version`` may name;
  it raises, with the reason, where the benchmark is not installed.
- ``environment_problem() -> str | None``: one line on a bad setting the bridge reads from the
  environment (a rules file), checked before a batch writes anything.

So a second bridge is its own modules and its entry point, and nothing here changes.
"""

from __future__ import annotations

from typing import Any

from ..engine import TrajectoryReplay
from ..worlds import provider_factories

__all__ = ["benchmark_checks", "options_problem"]


def benchmark_checks(result: TrajectoryReplay) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The checks and the drift of the bridge whose world served the run (see the module docstring), or
    None when no bridge did or it has no checks."""
    reports = (result.reports.get("real") or {}).values()
    benchmarks = sorted({report.get("benchmark") for report in reports
                         if isinstance(report, dict) and isinstance(report.get("benchmark"), str)})
    if not benchmarks:
        return None
    factories = provider_factories()
    for benchmark in benchmarks:
        checks = getattr(factories.get(benchmark), "benchmark_checks", None)
        if checks is not None:
            return checks(result)
    return None


def options_problem(benchmark_version: str | None) -> str | None:
    """One line on what the installed bridges refuse in a batch's options, or None: a
    ``--benchmark-version`` no bridge knows, or a bridge's bad environment setting."""
    factories = provider_factories()
    if benchmark_version:
        known: dict[str, list[str]] = {}
        unavailable: list[str] = []
        for name, factory in sorted(factories.items()):
            versions = getattr(factory, "known_versions", None)
            if versions is None:
                continue
            try:
                known[name] = list(versions())
            except Exception as exc:  # the benchmark is not installed, or its own code failed: say which
                unavailable.append(f"{name}: {exc}")
        if not any(benchmark_version in versions for versions in known.values()):
            said = [f"no installed benchmark has version {benchmark_version!r}"]
            said += [f"{name} knows {', '.join(versions)}" for name, versions in known.items()]
            said += unavailable
            return "--benchmark-version: " + "; ".join(said)
    for _name, factory in sorted(factories.items()):
        check = getattr(factory, "environment_problem", None)
        problem = check() if check is not None else None
        if problem:
            return problem
    return None
