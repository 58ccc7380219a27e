"""Bounded JSON values of a world's resources: what effects carry beside ids, and what policies see as ``state``.

A value is a preview, never the resource itself: strings are cut at :data:`MAX_STRING` characters,
lists and mappings at :data:`MAX_ITEMS` entries, nesting at :data:`MAX_DEPTH` levels, and what was cut
says so in place (a string ends in ``…[+N chars]``, a list gains a last ``…[+N items]`` element, a mapping
a ``…`` key). A file's value is its kind, size, digest and a short preview of its start, not its bytes.
Standard library only: this runs inside the env server.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Collection, Iterable, Protocol

__all__ = ["MAX_DEPTH", "MAX_ITEMS", "MAX_STRING", "MORE", "ValueCache", "bounded", "delta", "json_copy"]

MAX_STRING = 256
MAX_ITEMS = 64
MAX_DEPTH = 6
MORE = "…"  # the key a cut mapping gains
MAX_REFRESH = 4096  # values computed for resources not seen before, at most, per call
_NONE = object()  # a resource its domain gives no value


class ValueSource(Protocol):
    def values(self, resources: Collection[str]) -> dict[str, Any]: ...


def bounded(value: Any, *, max_items: int = MAX_ITEMS, depth: int = MAX_DEPTH) -> Any:
    """A JSON copy of ``value`` cut to size (see the module docstring); non-JSON scalars become strings."""
    kind = type(value)
    if kind is str:  # the common cases first, by exact type: cheaper than the isinstance chain below
        return value if len(value) <= MAX_STRING else f"{value[:MAX_STRING]}{MORE}[+{len(value) - MAX_STRING} chars]"
    if kind is int or kind is bool or value is None:
        return value
    if kind is dict and depth > 0 and len(value) <= max_items:
        return {(key if type(key) is str and len(key) <= MAX_STRING else bounded(str(key))): bounded(item, depth=depth - 1)
                for key, item in value.items()}
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, str):
        return value if len(value) <= MAX_STRING else f"{value[:MAX_STRING]}{MORE}[+{len(value) - MAX_STRING} chars]"
    if isinstance(value, Mapping):
        if depth <= 0:
            return f"{MORE}[{len(value)} keys]"
        items = list(value.items())
        out = {bounded(str(key)): bounded(item, depth=depth - 1) for key, item in items[:max_items]}
        if len(items) > max_items:
            out[MORE] = f"+{len(items) - max_items} keys"
        return out
    if isinstance(value, (list, tuple)):
        if depth <= 0:
            return f"{MORE}[{len(value)} items]"
        out_list = [bounded(item, depth=depth - 1) for item in value[:max_items]]
        if len(value) > max_items:
            out_list.append(f"{MORE}[+{len(value) - max_items} items]")
        return out_list
    return bounded(str(value))


_JSON_COPY = json.JSONEncoder(default=str)  # built once: ``json.dumps`` with options builds one per call


class _NotPlain(Exception):
    """A value :func:`_plain_copy` leaves to the JSON encoder."""


def json_copy(value: Any) -> Any:
    """``json.loads(json.dumps(value, default=str))``: what a value reads as once sent as JSON, never an
    alias of ``value``'s containers. Plain values (dicts with string keys, lists, tuples, strings, numbers,
    booleans, None, by exact type) are copied directly, several times faster than encoding and decoding
    them; anything else goes through the encoder, as before."""
    try:
        return _plain_copy(value)
    except (_NotPlain, RecursionError):
        return json.loads(_JSON_COPY.encode(value))


def _plain_copy(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is float or kind is bool or value is None:
        return value
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            out[key] = _plain_copy(item)
        return out
    if kind is list or kind is tuple:
        return [_plain_copy(item) for item in value]
    raise _NotPlain


def delta(before: Any, after: Any) -> Any:
    """How the numbers in a value moved: ``after - before`` for two numbers; for two mappings, a mapping
    of the same shape over the numeric fields both have (unchanged ones as 0); None when nothing compares."""
    if _number(before) and _number(after):
        return after - before
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        moved = {key: delta(before[key], after[key]) for key in after if key in before and key != MORE}
        moved = {key: change for key, change in moved.items() if change is not None}
        return moved or None
    return None


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class ValueCache:
    """The last known value of each resource of a world, with the digest it had then.

    A call's *before* values must be read before the call, when nobody knows yet what it will touch;
    computing every value before every call would cost a full read of the world each time. Instead the
    world refreshes what changed since it last looked (by digest: at first everything, afterwards only
    what another domain sharing the resources changed) and records the *after* values of what each call
    touched, so the before values of the next call are already known.
    """

    def __init__(self) -> None:
        self._known: dict[str, tuple[str, Any]] = {}

    def refresh(self, source: ValueSource, snapshot: Mapping[str, str]) -> bool:
        """Learn the values of the resources whose digest differs from the one last seen; False when
        there were more than :data:`MAX_REFRESH` and some are still to learn."""
        stale = [key for key, digest in snapshot.items() if self._known.get(key, ("",))[0] != digest]
        if stale:
            self._store(source.values(stale[:MAX_REFRESH]), stale[:MAX_REFRESH], snapshot)
        return len(stale) <= MAX_REFRESH

    def known(self, snapshot: Mapping[str, str], keys: Iterable[str]) -> dict[str, Any]:
        """The values of ``keys`` as they were when the world held ``snapshot``, where known."""
        out = {}
        for key in keys:
            digest, value = self._known.get(key, ("", _NONE))
            if key in snapshot and digest == snapshot[key] and value is not _NONE:
                out[key] = value
        return out

    def update(self, source: ValueSource, snapshot: Mapping[str, str], keys: Collection[str]) -> dict[str, Any]:
        """Read the values of ``keys`` as the world now holds them (``snapshot``), remember and return them."""
        present = [key for key in keys if key in snapshot]
        for key in keys:
            if key not in snapshot:
                self._known.pop(key, None)
        found = source.values(present) if present else {}
        self._store(found, present, snapshot)
        return {key: found[key] for key in present if key in found}

    def _store(self, found: Mapping[str, Any], keys: Iterable[str], snapshot: Mapping[str, str]) -> None:
        for key in keys:
            self._known[key] = (snapshot[key], found.get(key, _NONE))
