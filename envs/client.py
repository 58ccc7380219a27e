"""The host side of the env server protocol: a client with per-call timeouts, and a world handle.

The client reads and writes raw file descriptors (a child's pipes or a connected unix socket) and waits
with ``select``, so a hung server costs at most the call's timeout, never a hung host.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import select
import time
from collections import deque
from typing import Any, Callable, Iterable, Iterator, Mapping

from .errors import EnvError, WorldLost, WorldSpecError
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


class ServerGone(WorldLost):
    """The env server closed its end or died."""


class CallTimeout(WorldLost):
    """The env server did not answer within the call's timeout; the world is lost."""


class MessageTooLarge(EnvError):
    """A request longer than the protocol carries; it was not sent, and the server is still in step."""


class Reply:
    """A request sent ahead of its reply: :meth:`result` reads the replies up to its own (the server
    answers in order), keeping those of earlier requests for their own :meth:`result`."""

    __slots__ = ("_client", "message_id", "size", "timeout", "done", "_value", "_error")

    def __init__(self, client: "EnvClient", message_id: int, size: int, timeout: float):
        self._client = client
        self.message_id = message_id
        self.size = size
        self.timeout = timeout
        self.done = False
        self._value: Any = None
        self._error: EnvError | None = None

    def result(self) -> Any:
        """The reply's result; raises the :class:`EnvError` the request would have raised."""
        while not self.done:
            self._client._read_one()
        if self._error is not None:
            raise self._error
        return self._value


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
        self._unread: deque[Reply] = deque()  # sent with :meth:`send`, their replies not read yet
        self._unread_bytes = 0
        self._corked: list[bytes] | None = None  # requests held back to go in one write (see :meth:`corked`)

    def request(self, op: str, timeout: float | None = None, **fields: Any) -> Any:
        return self.send(op, timeout, **fields).result()

    def send(self, op: str, timeout: float | None = None, **fields: Any) -> Reply:
        """Send a request now and read its reply later (``result()``), so the server works on it while the
        caller does something else. The requests whose replies are unread stay within the window, as in
        :meth:`pipeline`: a write never blocks on a server blocked writing replies nobody reads."""
        if self.broken:
            raise ServerGone(GONE)
        message_id, data = self._encode(op, fields)
        while self._unread and self._unread_bytes + len(data) > self.window:
            self._read_one()
        if self.broken:
            raise ServerGone(GONE)
        try:
            self._send(data)
        except EnvError:
            self.broken = True
            raise
        reply = Reply(self, message_id, len(data), self.timeout if timeout is None else timeout)
        self._unread.append(reply)
        self._unread_bytes += len(data)
        return reply

    def send_each(self, op: str, messages: Iterable[Mapping[str, Any]],
                  timeout: float | None = None) -> list["Reply | EnvError"]:
        """One ``op`` request per message, all sent now (reading earlier replies only where the window is
        full), their replies to be read later with :func:`results`: an entry per message, its
        :class:`Reply`, or the :class:`EnvError` that kept it from being sent."""
        entries: list[Reply | EnvError] = []
        try:
            with self.corked():
                for fields in messages:
                    try:
                        entries.append(self.send(op, timeout, **fields))
                    except EnvError as exc:
                        entries.append(exc)
        except EnvError:  # the write failed: the client is broken, and each entry's result says so
            pass
        return entries

    @contextlib.contextmanager
    def corked(self) -> Iterator[None]:
        """Requests sent within go to the server in one write as the block ends (or sooner, before a
        reply is waited for): a run's requests wake the server once, not once each."""
        if self._corked is not None:  # already corked by the caller: its block ends it
            yield
            return
        self._corked = []
        try:
            yield
        except BaseException:
            # Interrupted: what was sent so far still goes, so the replies stay in step; a failed write
            # (the client is then broken) must not hide what interrupted the block.
            try:
                self._uncork()
            except EnvError:
                pass
            raise
        self._uncork()

    def _uncork(self) -> None:
        held, self._corked = self._corked, None
        if held:
            try:
                self._write(b"".join(held))
            except EnvError:
                self.broken = True
                raise

    @property
    def pending(self) -> int:
        """Requests sent whose replies are not read yet."""
        return len(self._unread)

    def settle(self) -> None:
        """Read every reply still unread (each kept for its :class:`Reply`)."""
        while self._unread:
            self._read_one()

    def _read_one(self) -> None:
        reply = self._unread.popleft()
        self._unread_bytes -= reply.size
        try:
            if self.broken:
                raise ServerGone(GONE)
            reply._value = self._result(reply.message_id, reply.timeout)
        except EnvError as exc:
            reply._error = exc
        except BaseException:  # interrupted mid-read: the stream is out of step
            self.broken = True
            reply._error = ServerGone(GONE)
            raise
        finally:
            reply.done = True

    def pipeline(self, op: str, messages: Iterable[Mapping[str, Any]], timeout: float | None = None) -> Iterator[Any]:
        """One ``op`` request per message, several in flight at once: yields, in order, each reply's result
        or the :class:`EnvError` that request would have raised alone, so the server works on the next
        requests while the caller handles a reply. Once the connection fails, every later one yields
        :class:`ServerGone`, as :meth:`request` would raise."""
        timeout = self.timeout if timeout is None else timeout
        self.settle()  # the replies read below are then this pipeline's own
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
        if self._corked:  # the request may be among those held back: send them, and hold back what follows
            self._uncork()
            self._corked = []
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
        if self._corked is not None:
            self._corked.append(data)
            return
        self._write(data)

    def _write(self, data: bytes) -> None:
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
            try:
                chunk = os.read(self.read_fd, 1 << 16)
            except OSError as exc:  # ECONNRESET: a socket's peer died with requests unread
                raise ServerGone(f"the env server's connection failed: {exc}") from None
            if not chunk:
                raise ServerGone("the env server closed the connection")
            self._buffer += chunk
            # the limit is one message's: replies sent ahead may fill the buffer with several whole lines
            end = self._buffer.find(b"\n")
            if (end if end >= 0 else len(self._buffer)) > MAX_MESSAGE:
                raise ServerGone("the env server sent an oversized message")
        line, _, self._buffer = self._buffer.partition(b"\n")
        return decode(line)

    def hello(self) -> dict[str, Any]:
        return checked_hello(self.request("hello"))


def checked_hello(info: Any) -> dict[str, Any]:
    """The server's answer to ``hello``, if it speaks this host's protocol; else :class:`ServerError`."""
    protocol = info.get("protocol") if isinstance(info, dict) else None
    if protocol != PROTOCOL_VERSION:
        raise ServerError("ProtocolMismatch", f"env server speaks protocol {protocol}, this host {PROTOCOL_VERSION}")
    return info


def results(entries: Iterable["Reply | EnvError"]) -> Iterator[Any]:
    """Each entry's result in order, or the :class:`EnvError` its request raised (see :meth:`EnvClient.send_each`)."""
    for entry in entries:
        if isinstance(entry, EnvError):
            yield entry
            continue
        try:
            yield entry.result()
        except EnvError as exc:
            yield exc


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

    def __init__(self, client: EnvClient, release: Callable[[EnvClient], None], call_timeout: float,
                 snapshot_ahead: Reply | None = None):
        """``snapshot_ahead``: a snapshot sent right after the load, answered while the caller works, for
        the first :meth:`snapshot` or :meth:`digest` (calls sent ahead of the world come after it)."""
        self.client = client
        self._release = release
        self.call_timeout = call_timeout
        self._closed = False
        self._snapshot_ahead = snapshot_ahead
        self._report_ahead: Reply | None = None  # a report sent behind the calls sent ahead

    def report_ahead(self, reply: Reply) -> None:
        """``reply`` answers the next :meth:`report`, unless a call is made first."""
        self._report_ahead = reply

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        self._snapshot_ahead = self._report_ahead = None
        return self.client.request("call", timeout=self.call_timeout, request=dict(request))

    def call_each(self, requests: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, Any] | EnvError]:
        self._snapshot_ahead = self._report_ahead = None
        return self.client.pipeline("call", ({"request": dict(request)} for request in requests), self.call_timeout)

    def _snapshot(self) -> dict[str, Any]:
        ahead, self._snapshot_ahead = self._snapshot_ahead, None
        return ahead.result() if ahead is not None else self.client.request("snapshot")

    def snapshot(self) -> dict[str, str]:
        return self._snapshot()["state"]

    def report(self) -> dict[str, Any]:
        ahead, self._report_ahead = self._report_ahead, None
        return (ahead.result() if ahead is not None else self.client.request("report"))["reports"]

    def digest(self) -> str:
        return self._snapshot()["digest"]

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._release(self.client)
