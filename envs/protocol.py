"""The env server protocol: versioned JSON messages, one per line, in both directions.

Request: ``{"id": N, "op": OP, ...}``; response: ``{"id": N, "ok": true, "result": ...}`` or
``{"id": N, "ok": false, "error": {"type": NAME, "message": TEXT, "field": FIELD?}}``.

Operations: ``hello`` (protocol and package version), ``load`` (``spec``, ``semantics``: build a world,
replacing any current one), ``call`` (``request``: one tool call, answering the outcome dict),
``snapshot`` (the state, and its digest), ``reset`` (rebuild the current world from its spec),
``close`` (drop the world), ``shutdown`` (close and exit). Nothing is pickled.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any, Mapping

try:  # reads messages three times as fast; optional, so that any Python 3.9+ can host a world
    import msgspec
    from msgspec import DecodeError as _FastDecodeError
    from msgspec.json import decode as _fast_decode
except ImportError:  # a server in an image of its own, with only the standard library
    _fast_decode = None
else:  # before 0.19 it read some integers between 2**64 and 2*10**19 wrong, without an error
    if tuple(int(part) for part in re.findall(r"\d+", msgspec.__version__)[:2]) < (0, 19):
        _fast_decode = None

PROTOCOL_VERSION = 1
OPS = ("hello", "load", "call", "snapshot", "reset", "close", "shutdown")
MAX_MESSAGE = 64 * 1024 * 1024  # a line longer than this is a protocol error, not a memory blow-up


# One encoder for every message: ``json.dumps`` with options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


def encode(message: Mapping[str, Any]) -> bytes:
    return _ENCODER.encode(message).encode("utf-8") + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    """One message; ``ValueError`` for a line that is not one (however deeply it nests)."""
    try:
        message = _loads(line)
    except RecursionError:  # the libraries give up at slightly different depths: refused the same way
        raise ValueError("a message nested too deeply") from None
    if not isinstance(message, dict):
        raise ValueError("a message must be a JSON object")
    return message


def _loads(line: bytes) -> Any:
    """A message, read exactly as ``json.loads`` reads it. msgspec reads standard JSON to the same values
    (integers of any size included) and refuses what only the standard library accepts (``NaN``,
    ``Infinity``, numbers out of a float's range, a lone surrogate's escape): those are read again by it."""
    if _fast_decode is not None:
        try:
            return _fast_decode(line)
        except _FastDecodeError:
            pass
    return json.loads(line)


def decoder() -> str:
    """Which library reads this process's messages: ``msgspec``, or ``json`` where it is not importable."""
    return "json" if _fast_decode is None else "msgspec"


def state_digest(state: Mapping[str, str]) -> str:
    """One digest for a whole snapshot: equal states, equal digests, in any runtime."""
    canonical = json.dumps(sorted(state.items()), separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
