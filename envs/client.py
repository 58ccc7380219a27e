"""The host side of the env server protocol: a client with per-call timeouts, and a world handle.

The client reads and writes raw file descriptors (a child's pipes or a connected unix socket) and waits
with ``select``, so a hung server costs at most the call's timeout, never a hung host.
"""

from __future__ import annotations

import fcntl
import os
import select
import time
from collections import deque
from typing import Any, Callable, Iterable, Iterator, Mapping

from .errors import EnvError, WorldSpecError
from .protocol import MAX_MESSAGE, PROTOCOL_VERSION, decode, encode
from .interface import WorldHandle

DEFAULT_TIMEOUT = 30.0
# Requests sent ahead of their replies stay within what the pipe to the server holds (64 KiB by default
# on Linux, as little as a page for a user over its pipe quota), so a write never blocks on a server that
# is itself blocked writing replies nobody reads yet.
PIPELINE_BYTES = 48 * 1024
PIPELINE_DEPTH = 64
GONE = "the env server is gone (an earlier call failed)"


class ServerError(EnvError):
    """The env server answered an operation with an error."""

    def __init__(self, kind: str, message: str):
        self.kind = kind
        super().__init__(f"{kind}: {message}")


class ServerGone(EnvError):
    """The env server closed its end or died."""


class CallTimeout(EnvError):
    """The env server did not answer within the call's timeout; the world is lost."""


class MessageTooLarge(EnvError):
    """A request longer than the protocol carries; it was not sent, and the server is still in step."""


class EnvClient:
    """Speaks the protocol over a pair of file descriptors."""

    def __init__(self, read_fd: int, write_fd: int, timeout: float = DEFAULT_TIMEOUT):
        self.read_fd = read_fd
        self.write_fd = write_fd
        self.timeout = timeout
        self._buffer = b""
        self._next_id = 0
        self.broken = False
        self.window = _window(write_fd)

    def request(self, op: str, timeout: float | None = None, **fields: Any) -> Any:
        if self.broken:
            raise ServerGone(GONE)
        message_id, data = self._encode(op, fields)
        try:
            self._send(data)
        except EnvError:
            self.broken = True
            raise
        return self._result(message_id, self.timeout if timeout is None else timeout)

    def pipeline(self, op: str, messages: Iterable[Mapping[str, Any]], timeout: float | None = None) -> Iterator[Any]:
        """One ``op`` request per message, several in flight at once: yields, in order, each reply's result
        or the :class:`EnvError` that request would have raised alone, so the server works on the next
        requests while the caller handles a reply. Once the connection fails, every later one yields
        :class:`ServerGone`, as :meth:`request` would raise."""
        timeout = self.timeout if timeout is None else timeout
        messages = iter(messages)
        waiting: deque[tuple[int, int] | EnvError] = deque()  # per message: (id, size) once sent, or its refusal
        ahead: tuple[int, bytes] | None = None  # encoded, waiting for room in the window
        in_flight = sent = 0
        exhausted = False
        while True:
            while not exhausted and not self.broken:
                if ahead is None:
                    fields = next(messages, None)
                    if fields is None:
                        exhausted = True
                        break
                    try:
                        ahead = self._encode(op, fields)
                    except MessageTooLarge as exc:
                        waiting.append(exc)
                        continue
                if sent and (in_flight + len(ahead[1]) > self.window or sent >= PIPELINE_DEPTH):
                    break
                try:
                    self._send(ahead[1])
                except EnvError as exc:
                    self.broken = True
                    waiting.append(exc)
                else:
                    waiting.append((ahead[0], len(ahead[1])))
                    in_flight += len(ahead[1])
                    sent += 1
                ahead = None
            if not waiting:
                if exhausted:
                    return
                # broken with messages left: each fails as a request on a broken client would
                if ahead is not None:
                    ahead = None
                    yield ServerGone(GONE)
                for _ in messages:
                    yield ServerGone(GONE)
                return
            entry = waiting.popleft()
            if isinstance(entry, EnvError):
                yield ServerGone(GONE) if self.broken and isinstance(entry, MessageTooLarge) else entry
                continue
            message_id, size = entry
            in_flight -= size
            sent -= 1
            if self.broken:
                yield ServerGone(GONE)
                continue
            try:
                yield self._result(message_id, timeout)
            except EnvError as exc:
                yield exc

    def _encode(self, op: str, fields: Mapping[str, Any]) -> tuple[int, bytes]:
        self._next_id += 1
        data = encode({"id": self._next_id, "op": op, **fields})
        if len(data) > MAX_MESSAGE:  # refuse this one request; sending it would put every later reply out of step
            raise MessageTooLarge(f"the {op} request is {len(data)} bytes, over the protocol's limit of {MAX_MESSAGE}; not sent")
        return self._next_id, data

    def _result(self, message_id: int, timeout: float) -> Any:
        """The result of the sent request ``message_id``, its reply being the next to arrive."""
        try:
            reply = self._receive(timeout)
        except EnvError:
            self.broken = True
            raise
        if reply.get("id") != message_id:
            self.broken = True
            raise ServerGone(f"protocol out of step: expected reply {message_id}, got {reply.get('id')!r}")
        if not reply.get("ok"):
            error = reply.get("error") or {}
            if error.get("type") == "WorldSpecError":
                raise WorldSpecError(error.get("field") or "world", error.get("message", ""))
            raise ServerError(error.get("type", "Error"), error.get("message", ""))
        return reply.get("result")

    def _send(self, data: bytes) -> None:
        view = memoryview(data)
        try:
            while view:
                written = os.write(self.write_fd, view)
                view = view[written:]
        except OSError as exc:  # EPIPE: the server is gone
            raise ServerGone(f"cannot write to the env server: {exc}") from None

    def _receive(self, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise CallTimeout(f"no answer from the env server within {timeout:g} s")
            ready, _, _ = select.select([self.read_fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(self.read_fd, 1 << 16)
            if not chunk:
                raise ServerGone("the env server closed the connection")
            self._buffer += chunk
            if len(self._buffer) > MAX_MESSAGE:
                raise ServerGone("the env server sent an oversized message")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return decode(line)

    def hello(self) -> dict[str, Any]:
        info = self.request("hello")
        if info.get("protocol") != PROTOCOL_VERSION:
            raise ServerError("ProtocolMismatch", f"env server speaks protocol {info.get('protocol')}, this host {PROTOCOL_VERSION}")
        return info


def _window(fd: int) -> int:
    """The bytes of requests that may wait unread in ``fd``: less than a pipe's capacity."""
    if not hasattr(fcntl, "F_GETPIPE_SZ"):  # not Linux: pipes hold their default
        return PIPELINE_BYTES
    try:
        capacity = fcntl.fcntl(fd, fcntl.F_GETPIPE_SZ)
    except OSError:  # not a pipe (a socket buffers more than the window)
        return PIPELINE_BYTES
    return min(PIPELINE_BYTES, capacity * 3 // 4)


class ServerWorld(WorldHandle):
    """A world hosted by an env server; ``release`` gives the server back (to a pool, or kills it)."""

    def __init__(self, client: EnvClient, release: Callable[[EnvClient], None], call_timeout: float):
        self.client = client
        self._release = release
        self.call_timeout = call_timeout
        self._closed = False

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return self.client.request("call", timeout=self.call_timeout, request=dict(request))

    def call_each(self, requests: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, Any] | EnvError]:
        return self.client.pipeline("call", ({"request": dict(request)} for request in requests), self.call_timeout)

    def snapshot(self) -> dict[str, str]:
        return self.client.request("snapshot")["state"]

    def report(self) -> dict[str, Any]:
        return self.client.request("report")["reports"]

    def digest(self) -> str:
        return self.client.request("snapshot")["digest"]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._release(self.client)
