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
from typing import Any, Mapping

PROTOCOL_VERSION = 1
OPS = ("hello", "load", "call", "snapshot", "reset", "close", "shutdown")
MAX_MESSAGE = 64 * 1024 * 1024  # a line longer than this is a protocol error, not a memory blow-up


# One encoder for every message: ``json.dumps`` with options builds a new one per call.
_ENCODER = json.JSONEncoder(separators=(",", ":"), default=str)


def encode(message: Mapping[str, Any]) -> bytes:
    return _ENCODER.encode(message).encode("utf-8") + b"\n"


def decode(line: bytes) -> dict[str, Any]:
    message = json.loads(line)
    if not isinstance(message, dict):
        raise ValueError("a message must be a JSON object")
    return message


def state_digest(state: Mapping[str, str]) -> str:
    """One digest for a whole snapshot: equal states, equal digests, in any runtime."""
    canonical = json.dumps(sorted(state.items()), separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()
