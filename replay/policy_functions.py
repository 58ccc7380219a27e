"""Aggregate functions policy conditions can call: sums and counts over lists, such as ``history``.

CEL has no fold, so a total over earlier calls cannot be written in CEL itself; these functions give one
without unrolling. They are plain Python callables, collected once in :data:`FUNCTIONS` and handed to
every evaluation context. A *path* names a value inside each element: a dotted string (``"resolved.amount"``)
or a list of keys (``["effects", "values", "bank:account/a"]``, for keys that hold dots). An element
without the value at the path, or with a value of the wrong kind, is skipped, so a sum over a mixed
history needs no guards.

``sum(list)``, ``sum(list, path)``
    The total of the numbers in the list, or at ``path`` in each element: an int when every number is
    one, else a double (CEL adds an int to a double only through ``double(x)``; it compares them freely).
    ``sum(history.filter(h, h.tool == 'transfer_funds' && h.committed), 'resolved.amount')``
``count_by(list, path)``
    How many elements hold each value at ``path``, as a map: ``count_by(history, 'tool')``.
``sum_by(list, key_path, value_path)``
    The total at ``value_path`` per value at ``key_path``: ``sum_by(history, 'resolved.to', 'resolved.amount')``.
``get(value, path, default)``
    The value at ``path``, or ``default`` when any step is missing: ``get(count_by(history, 'tool'),
    ['transfer_funds'], 0)``.
``carries(value, kind, wanted)``, ``mentions(value, kind, wanted)``
    Some leaf of ``value`` is (contains) ``wanted``, compared in the normal form of ``kind`` (``url``,
    ``email``, ``iban``, ``phone``, ``id``, ``text``), as benchmarks compare values:
    ``carries(resolved, 'iban', 'US133000000121212121212')`` (see :mod:`.value_kinds`).
``quotes(value, corpus, excluded)``
    Some text leaf of ``value`` sends data the named corpus holds (a world's texts, registered by a bridge):
    ``quotes(resolved, 'bench/v2/mail', 'the goal')`` (see :mod:`.corpora`).
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Mapping
from typing import Any, Callable, Iterable

from . import corpora, value_kinds

__all__ = ["FUNCTIONS", "count_by", "forget_interrupt", "get", "raise_interrupt", "sum_by", "total"]

_MISSING = object()


def _steps(path: Any) -> list[Any]:
    if isinstance(path, str):
        return path.split(".") if path else []
    if isinstance(path, (list, tuple)):
        return list(path)
    raise TypeError(f"a path is a dotted string or a list of keys, not {type(path).__name__}")


def _at(value: Any, steps: list[Any]) -> Any:
    for step in steps:
        if isinstance(value, Mapping) and step in value:
            value = value[step]
        elif isinstance(value, list) and isinstance(step, int) and not isinstance(step, bool) and -len(value) <= step < len(value):
            value = value[step]
        else:
            return _MISSING
    return value


def _items(items: Any, name: str) -> Iterable[Any]:
    if not isinstance(items, list):
        raise TypeError(f"{name}() takes a list first, not {type(items).__name__}")
    return items


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _add(numbers: Iterable[Any]) -> int | float:
    result: int | float = 0
    as_double = False
    for number in numbers:
        as_double = as_double or isinstance(number, float)
        result += number
    return float(result) if as_double else result


def total(items: Any, path: Any = None) -> int | float:
    """``sum(list)`` / ``sum(list, path)``: the total of the numbers (at ``path``), skipping the rest."""
    steps = [] if path is None else _steps(path)
    return _add(value for value in (_at(item, steps) for item in _items(items, "sum")) if _is_number(value))


def count_by(items: Any, path: Any) -> dict[Any, int]:
    """``count_by(list, path)``: value at ``path`` -> how many elements hold it (only strings, ints, bools)."""
    steps = _steps(path)
    counts: dict[Any, int] = {}
    for item in _items(items, "count_by"):
        key = _at(item, steps)
        if isinstance(key, (str, int)):
            counts[key] = counts.get(key, 0) + 1
    return counts


def sum_by(items: Any, key_path: Any, value_path: Any) -> dict[Any, int | float]:
    """``sum_by(list, key_path, value_path)``: value at ``key_path`` -> total of the numbers at ``value_path``."""
    key_steps, value_steps = _steps(key_path), _steps(value_path)
    groups: dict[Any, list[Any]] = {}
    for item in _items(items, "sum_by"):
        key, value = _at(item, key_steps), _at(item, value_steps)
        if isinstance(key, (str, int)) and _is_number(value):
            groups.setdefault(key, []).append(value)
    return {key: _add(values) for key, values in groups.items()}


def get(value: Any, path: Any, default: Any) -> Any:
    """``get(value, path, default)``: the value at ``path``, or ``default`` when any step is missing."""
    found = _at(value, _steps(path))
    return default if found is _MISSING else found


_interrupted = threading.local()  # per thread: Dask's workers judge calls in several
# How the CEL library words what a Python function raised, for an interrupt that arrived before the
# wrapper below could see it (a signal is acted on as a Python frame starts, the wrapper's own included).
_INTERRUPT_WORDING = (("failed: KeyboardInterrupt", KeyboardInterrupt), ("failed: SystemExit", SystemExit))


def _passing_interrupts(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` as CEL calls it. The CEL library turns anything a Python function raises into its own
    error, a Ctrl-C or a SIGTERM's exit included, which would then read as a rule that could not be
    evaluated while the batch went on: such an exception is kept here, for :func:`raise_interrupt`."""

    @functools.wraps(function)
    def call(*args: Any) -> Any:
        try:
            return function(*args)
        except Exception:
            raise
        except BaseException as exc:  # KeyboardInterrupt, SystemExit
            _interrupted.exception = exc
            raise

    return call


def forget_interrupt() -> None:
    """Drop an interrupt kept from an evaluation that ended by raising it itself (a second Ctrl-C)."""
    _interrupted.exception = None


def raise_interrupt(error: Exception | None = None) -> None:
    """Raise, after a CEL evaluation, the interrupt one of these functions received during it, if any;
    ``error``, what the evaluation raised, is read for one the library reported in its own words."""
    exception = getattr(_interrupted, "exception", None)
    if exception is not None:
        _interrupted.exception = None
        raise exception
    if error is not None:
        text = str(error)
        for wording, kind in _INTERRUPT_WORDING:
            if wording in text:
                raise kind() from error


FUNCTIONS: dict[str, Callable[..., Any]] = {
    name: _passing_interrupts(function)
    for name, function in {"sum": total, "count_by": count_by, "sum_by": sum_by, "get": get,
                           "quotes": corpora.quotes, **value_kinds.FUNCTIONS}.items()
}
