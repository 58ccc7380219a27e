"""Reading the project's YAML files (scenarios, worlds, bindings): safe YAML whose values must be JSON.

A bad file costs one line naming the file and the place, never a traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from . import limits
from .errors import ScenarioError

__all__ = ["json_problem", "read_yaml"]


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """Safe YAML (libyaml when present) that keeps dates as strings: scenario data must be JSON."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_YAML_LOADER = _Loader


def json_problem(value: Any, path: str = "") -> tuple[str, str] | None:
    """The first place a YAML document holds something JSON cannot: ``(field, message)``."""
    if isinstance(value, dict):
        for key, item in value.items():
            where = f"{path}.{key}" if path else str(key)
            if not isinstance(key, str):
                hint = " (YAML reads on/off/yes/no as booleans: quote the key)" if isinstance(key, bool) else ""
                return where, f"keys must be strings, got {type(key).__name__} {key!r}{hint}"
            problem = json_problem(item, where)
            if problem:
                return problem
    elif isinstance(value, list):
        for index, item in enumerate(value):
            problem = json_problem(item, f"{path}[{index}]")
            if problem:
                return problem
    elif not (value is None or isinstance(value, (str, int, float, bool))):
        return path or "(root)", f"{type(value).__name__} is not a JSON value"
    return None


def read_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(str(path), None, f"cannot read: {exc}") from None
    try:
        data = yaml.load(text, Loader=_YAML_LOADER)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "yaml"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ScenarioError(str(path), where, f"not valid YAML: {problem}") from None
    except ValueError as exc:  # an integer past Python's 4,300-digit conversion limit, say
        what = "a number of more than 4300 digits" if "digits" in str(exc) else str(exc).splitlines()[0]
        raise ScenarioError(str(path), "yaml", f"not valid YAML: {what}") from None
    if not isinstance(data, dict):
        raise ScenarioError(str(path), None, "expected a YAML mapping at the top level")
    limits.yaml_size(data, str(path))  # before anything walks it: an alias bomb is refused, never expanded
    problem = json_problem(data)
    if problem:
        raise ScenarioError(str(path), *problem)
    return data
