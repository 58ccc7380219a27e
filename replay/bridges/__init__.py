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

So a second bridge is its own modules and its entry point, and nothing here changes. A bridge that lets
users add rules of their own through an environment variable reads them with :func:`user_rules` and
checks them with :func:`rules_file_problem`.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..engine import TrajectoryReplay
from ..errors import InputError, ScenarioError
from ..model import first_error
from ..policy import Policy, PolicySpec, RuleSpec
from ..worlds import provider_factories
from ..yaml_io import read_yaml

__all__ = ["benchmark_checks", "options_problem", "rules_file_problem", "rules_from_environment", "user_rules"]


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


def user_rules(path: str | Path) -> list[RuleSpec]:
    """A user's own rules (a YAML file ``rules: [...]``, as a scenario's policy), added by a bridge to every
    run's policy; raises :class:`~..errors.ScenarioError` naming the file and the field."""
    file = str(path)
    try:
        spec = PolicySpec.model_validate(read_yaml(Path(path)))
    except ValidationError as exc:
        raise ScenarioError(file, *first_error(exc)) from None
    Policy.compile(spec, file)  # a condition that does not compile is reported here, once
    return list(spec.rules)


def rules_from_environment(variable: str) -> list[RuleSpec]:
    """The user's rules in the file the environment ``variable`` names, or none where it names none."""
    path = os.environ.get(variable)
    return user_rules(path) if path else []


def rules_file_problem(variable: str, package: str) -> str | None:
    """A bad rules file in the environment ``variable``, in one line, where the benchmark's ``package`` is
    installed (elsewhere the rules matter to no run): it would otherwise cost every run its world."""
    path = os.environ.get(variable)
    if not path or importlib.util.find_spec(package) is None:
        return None
    try:
        user_rules(path)
    except InputError as exc:
        return f"{variable}: {exc.line()}"
    return None
