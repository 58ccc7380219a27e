"""Bounds on what one input may cost: recorded files and scenarios come from people we do not trust.

Every limit has a default that real runs stay far below, a setting to raise it — the environment variable
``LITMUS_LIMIT_<NAME>`` (upper case), or ``--limit NAME=N`` on the command line, which sets that variable
so worker processes see it too — and, when exceeded, one line naming the file, the field and the limit.

=====================  ===========  ============================================================
name                   default      what it bounds
=====================  ===========  ============================================================
``file_bytes``         104857600    bytes of one run file (100 MiB), checked before it is read
``member_bytes``       104857600    bytes one member of an archive (an inspect_ai ``.eval`` sample)
                                    decompresses to (100 MiB), checked while decompressing: a zip
                                    bomb is refused after at most this many bytes
``archive_bytes``      1073741824   bytes all the members of one archive decompress to together (1
                                    GiB), counted as they are decompressed: many members each under
                                    ``member_bytes`` cannot add up past it
``calls``              10000        tool calls in one trajectory
``yaml_nodes``         1000000      values in a scenario or worlds file, each alias counted at the
                                    size of what it repeats (an alias bomb is refused, not expanded)
``cel_length``         4096         characters of one CEL condition, checked before compiling
``cel_nesting``        32           depth of brackets in one CEL condition, checked before compiling
``cel_cost``           1000000      steps one condition may take over one call: the product of the
                                    longest list or map in the variables it reads, once per level
                                    of nested macros
=====================  ===========  ============================================================
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from .errors import InputError

__all__ = ["DEFAULTS", "LimitExceeded", "apply_settings", "check_calls", "check_file_size", "check_settings", "get",
           "hint", "parse_setting", "yaml_size"]

DEFAULTS: dict[str, int] = {
    "file_bytes": 100 * 1024 * 1024,
    "member_bytes": 100 * 1024 * 1024,
    "archive_bytes": 1024 * 1024 * 1024,
    "calls": 10_000,
    "yaml_nodes": 1_000_000,
    "cel_length": 4096,
    "cel_nesting": 32,
    "cel_cost": 1_000_000,
}

_ENV = "LITMUS_LIMIT_"


class LimitExceeded(InputError):
    """An input over one of the limits; the message says how to raise it."""

    def __init__(self, file: str | None, field: str | None, what: str, name: str):
        super().__init__(file, field, f"{what}, over the limit of {get(name)} ({hint(name)})")
        self.limit = name


def hint(name: str) -> str:
    return f"raise it with --limit {name}=N or {_ENV}{name.upper()}"


def get(name: str) -> int:
    """The limit in force: the environment's setting, else the default."""
    raw = os.environ.get(_ENV + name.upper())
    if raw is None:
        return DEFAULTS[name]
    try:
        value = int(raw)
    except ValueError:
        raise InputError(None, _ENV + name.upper(), f"not a whole number: {raw!r}") from None
    if value < 1:
        raise InputError(None, _ENV + name.upper(), f"must be at least 1, not {value}")
    return value


def parse_setting(text: str) -> tuple[str, int]:
    """``NAME=N`` from the command line; an unknown name or a bad number raises :class:`InputError`."""
    name, sep, raw = text.partition("=")
    name = name.strip().lower()
    if not sep or name not in DEFAULTS:
        raise InputError(None, "--limit", f"expected NAME=N with NAME one of: {', '.join(DEFAULTS)}; got {text!r}")
    try:
        value = int(raw)
    except ValueError:
        raise InputError(None, f"--limit {name}", f"not a whole number: {raw!r}") from None
    if value < 1:
        raise InputError(None, f"--limit {name}", f"must be at least 1, not {value}")
    return name, value


def apply_settings(settings: Mapping[str, int]) -> None:
    """Put command-line limits where this process and every worker it starts read them."""
    for name, value in settings.items():
        os.environ[_ENV + name.upper()] = str(value)


def check_settings() -> None:
    """Read every limit once, so a bad setting is one line up front rather than a failure mid-batch."""
    for name in DEFAULTS:
        get(name)


def check_file_size(path: str | Path) -> None:
    """Refuse a run file larger than ``file_bytes`` before reading any of it."""
    try:
        size = os.stat(path).st_size
    except OSError:
        return  # the reader says why it cannot read it
    if size > get("file_bytes"):
        raise LimitExceeded(str(path), None, f"{size} bytes", "file_bytes")


def check_calls(count: int, file: str | None, field: str) -> None:
    if count > get("calls"):
        raise LimitExceeded(file, field, f"{count} tool calls", "calls")


def yaml_size(value: Any, file: str) -> int:
    """How many values a loaded YAML document stands for once every alias is expanded, without expanding
    any: a shared node is measured once. Refuses a document over ``yaml_nodes`` or one that holds itself."""
    limit = get("yaml_nodes")  # read first: a bad setting is reported before the walk
    sizes: dict[int, int] = {}
    open_nodes: set[int] = set()
    # Iterative post-order walk: a deeply nested document must not exhaust Python's stack.
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        node, children_done = stack.pop()
        if not isinstance(node, (dict, list)):
            continue
        key = id(node)
        children = list(node.values()) if isinstance(node, dict) else node
        if children_done:
            open_nodes.discard(key)
            sizes[key] = 1 + sum(sizes.get(id(child), 1) for child in children)
            continue
        if key in sizes:
            continue
        if key in open_nodes:
            raise InputError(file, None, "a YAML alias refers to a node that contains it; scenario data must be finite")
        open_nodes.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in children if isinstance(child, (dict, list)))
    total = sizes.get(id(value), 1)
    if total > limit:
        raise LimitExceeded(file, None, f"{total} values once its YAML aliases are expanded", "yaml_nodes")
    return total
