"""The host side of the env server protocol: a client with per-call timeouts, and a world handle.

The client reads and writes raw file descriptors (a child's pipes or a connected unix socket) and waits
with ``select``, so a hung server costs at most the call's timeout, never a hung host.
"""

from __future__ import annotations

import os
import select
import time
from typing import Any, Callable, Mapping

from .errors import EnvError, WorldSpecError
from .protocol import MAX_MESSAGE, PROTOCOL_VERSION, decode, encode
from .interface import WorldHandle

DEFAULT_TIMEOUT = 30.0


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

    def request(self, op: str, timeout: float | None = None, **fields: Any) -> Any:
        if self.broken:
            raise ServerGone("the env server is gone (an earlier call failed)")
        self._next_id += 1
        message_id = self._next_id
        data = encode({"id": message_id, "op": op, **fields})
        if len(data) > MAX_MESSAGE:  # refuse this one request; sending it would put every later reply out of step
            raise MessageTooLarge(f"the {op} request is {len(data)} bytes, over the protocol's limit of {MAX_MESSAGE}; not sent")
        try:
            self._send(data)
            reply = self._receive(self.timeout if timeout is None else timeout)
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


class ServerWorld(WorldHandle):
    """A world hosted by an env server; ``release`` gives the server back (to a pool, or kills it)."""

    def __init__(self, client: EnvClient, release: Callable[[EnvClient], None], call_timeout: float):
        self.client = client
        self._release = release
        self.call_timeout = call_timeout
        self._closed = False

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return self.client.request("call", timeout=self.call_timeout, request=dict(request))

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
