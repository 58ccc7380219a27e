"""The range of every number a world file sets that bounds work or time: a timeout, a process count, a
size, a rate. World files are written by people we do not trust, and a NaN, an infinity or a huge value
there would stall every call (a ``sleep infinity`` under a timeout of 1e8) or quietly neuter it (every
command failing at set-up under a NaN timeout and scored as refused). A value outside its range is one
:class:`WorldSpecError` naming the field; the docs' Worlds section ("Limits a world sets") lists the ranges (a test keeps the
two equal).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any

from .errors import WorldSpecError

__all__ = ["BOUNDS", "Bound", "bounded_number"]

MiB = 1024 * 1024


@dataclass(frozen=True)
class Bound:
    """``low`` (excluded where ``above`` is set) to ``high``, both finite; ``integer``: whole numbers only."""

    low: float
    high: float
    integer: bool = False
    above: bool = False
    unit: str = ""

    def admits(self, value: Any) -> bool:
        kinds = (int,) if self.integer else (int, float)
        if not isinstance(value, kinds) or isinstance(value, bool):
            return False
        if isinstance(value, float) and not math.isfinite(value):
            return False
        return (value > self.low if self.above else value >= self.low) and value <= self.high

    def describe(self) -> str:
        kind = "a whole number" if self.integer else "a number"
        low = f"above {self.low:g}" if self.above else f"from {_show(self.low)}"
        unit = f" {self.unit}" if self.unit else ""
        return f"{kind} {low} to {_show(self.high)}{unit}"


def _show(number: float) -> str:
    return f"{int(number)}" if float(number).is_integer() else f"{number:g}"


# field (below ``world.``) -> its range
BOUNDS: dict[str, Bound] = {
    "shell.timeout": Bound(1, 600, unit="seconds"),
    "shell.max_timeout": Bound(1, 600, unit="seconds"),
    "shell.processes": Bound(1, 1024, integer=True),
    "shell.memory": Bound(16 * MiB, 2048 * MiB, integer=True, unit="bytes"),
    "shell.file_size": Bound(1, 1024 * MiB, integer=True, unit="bytes"),
    "bank.rate_limit.limit": Bound(0, 1_000_000, integer=True),
    "bank.rate_limit.window_seconds": Bound(0, 366 * 24 * 3600, above=True, unit="seconds"),
}


def bounded_number(section: Mapping[str, Any], field: str, default: Any) -> Any:
    """``section``'s value for ``field``'s last key (``default`` when absent or empty), or
    :class:`WorldSpecError` naming ``world.<field>`` when it is out of its range in :data:`BOUNDS`."""
    value = section.get(field.rsplit(".", 1)[-1])
    if value is None:
        return default
    bound = BOUNDS[field]
    if not bound.admits(value):
        raise WorldSpecError(f"world.{field}", f"expected {bound.describe()}, got {_shown_value(value)}")
    return value


def _shown_value(value: Any) -> str:
    """The value as the message shows it: a huge integer by its size (its digits could not even be printed)."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of about {int(value.bit_length() * 0.30103)} digits"
    text = repr(value)
    return text if len(text) <= 60 else text[:59] + "…"
