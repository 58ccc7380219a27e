"""The pair log of a live run: JSON Lines, each line a JSON-RPC 2.0 message, written and flushed as each call
is answered, so a run cut short keeps every call answered before.

The lines, in order:

- ``notifications/litmus-replay/world``: the world (its key and file), the principal the agent acts as,
  the ambient session and the runtime;
- per call: the ``tools/call`` request, a ``notifications/litmus-replay/pair`` notification with the call's
  pair (``CallReplay.to_dict()``, and the request's id), then the response (a ``CallToolResult``, or a
  JSON-RPC error for a tool nobody knows);
- a call refused before any world saw it (arguments that do not fit the tool's schema) is one
  ``notifications/litmus-replay/refused`` notification: not a call of the run;
- ``notifications/litmus-replay/summary`` when the server ends: the calls per class and the run's class.

So the MCP adapter reads the file as the run it was (notifications other than the world's are not calls),
and ``revalidate`` replays it; the pair notifications say what was judged live.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Any

__all__ = ["NOTIFY_PAIR", "NOTIFY_REFUSED", "NOTIFY_SUMMARY", "NOTIFY_WORLD", "PairLog"]

NOTIFY_WORLD = "notifications/litmus-replay/world"
NOTIFY_PAIR = "notifications/litmus-replay/pair"
NOTIFY_REFUSED = "notifications/litmus-replay/refused"
NOTIFY_SUMMARY = "notifications/litmus-replay/summary"
FORMAT_VERSION = 1


class PairLog:
    """A pair log opened for writing; a file that exists already is refused (:class:`FileExistsError`), so
    no earlier run's log is lost."""

    def __init__(self, path: str | Path, world: dict[str, Any]):
        self.path = Path(path)
        self._file: IO[str] = self.path.open("x", encoding="utf-8")
        self._write([_notification(NOTIFY_WORLD, {"format_version": FORMAT_VERSION, **world})])

    def call(self, request_id: Any, name: str, arguments: Any, pair: dict[str, Any],
             response: dict[str, Any]) -> None:
        """A call, its pair and its response (``{"result": ...}`` or ``{"error": ...}``), as one write."""
        self._write([
            {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": name, "arguments": arguments}},
            _notification(NOTIFY_PAIR, {"request_id": request_id, **pair}),
            {"jsonrpc": "2.0", "id": request_id, **response},
        ])

    def refused(self, request_id: Any, name: str, arguments: Any, error: dict[str, Any]) -> None:
        self._write([_notification(NOTIFY_REFUSED, {"request_id": request_id, "name": name, "arguments": arguments,
                                                    "error": error})])

    def close(self, summary: dict[str, Any] | None = None) -> None:
        if self._file.closed:
            return
        try:
            if summary is not None:
                self._write([_notification(NOTIFY_SUMMARY, summary)])
        finally:
            self._file.close()

    def _write(self, messages: list[dict[str, Any]]) -> None:
        self._file.write("".join(json.dumps(m, ensure_ascii=False, default=str) + "\n" for m in messages))
        self._file.flush()


def _notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}
