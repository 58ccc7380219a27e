"""Hosts (sandboxes, containers) kept for the next world, written once for both isolated runtimes.

A host is made for a key (what it was started with: its ``/etc``, its mounts); a world is
opened on an idle host of its key (or, where the runtime says a host of another key ``fits`` it, of that
key), else on the warm spare if its key matches, else on a new host. When the
world closes, its host is kept (after the server's ``close``, which tears the world down) unless it ran a
tool that may leave state a reload does not rebuild, lost its server, is due to retire (``retire``: a
sandbox's server near its CPU limit), or the pool is full — then it is stopped. A world that loses its
server stops its host at once.

Every host costs a server's start (an interpreter and its imports), so the pool starts none it will not
use: the warm spare is started only for a key whose hosts are not kept (reuse off, or its last host was
stopped when its world closed) — a key whose host is kept finds it idle next time — and a spare is never
stopped unused: another key's world leaves it be, and a newer spare sends it idle for its own key. A
caller that knows which keys its next worlds have may :meth:`~Pool.prepare` hosts for them, started
together so their servers boot side by side while it works. A new spare or prepared host may be sent a
warm-up (its runtime builds and drops one of its worlds there), whose answer is read when it is taken.
A world's ``close`` is answered while the caller goes on: the next world on that host reads the answer
first, and a host that failed it is stopped.
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Generic, Hashable, Iterable, Iterator, Mapping, Protocol, TypeVar

from ..client import CallTimeout, EnvClient, Reply, ServerGone, ServerWorld, results
from ..errors import EnvError
from ..interface import PendingWorld


class Answer(Protocol):
    """A reply read later (:class:`~..client.Reply`): ``result()`` raises :class:`EnvError` if it failed."""

    def result(self) -> Any: ...


class Host(Protocol):
    client: EnvClient | None
    tainted: bool  # ran a tool that may leave state outside what the next load rebuilds: never reuse
    worlds: int  # worlds hosted so far

    def alive(self) -> bool: ...


H = TypeVar("H", bound=Host)


class Pool(Generic[H]):
    """``start(key)`` makes a host, ``stop(host)`` ends one. ``idle``: hosts kept, least recently used out
    first; ``warm``: keep one host booting for the next world of the same key; ``retire(host)``: whether a
    host whose world closed is worn out, and stopped rather than kept; ``fits(want, have)``: whether a
    host made for key ``have`` may serve a world of another key ``want`` (an idle host of the world's own
    key is taken first, and a host goes back idle under its own key)."""

    def __init__(self, start: Callable[[Hashable], H], stop: Callable[[H], None], *, idle: int, warm: bool = False,
                 retire: Callable[[H], bool] | None = None, close_timeout: float = 10.0,
                 start_many: Callable[[list[Hashable]], list[H]] | None = None,
                 fits: Callable[[Hashable, Hashable], bool] | None = None):
        self._start = start
        self._start_many = start_many or (lambda keys: [start(key) for key in keys])
        self._stop = stop
        self.idle_limit = idle
        self.warm = warm
        self.retire = retire
        self.close_timeout = close_timeout
        self.fits = fits
        self._live: dict[int, H] = {}
        self._made_for: dict[int, Hashable] = {}  # live host -> the key it was started with
        self._idle: list[tuple[Hashable, H]] = []
        self._spare: tuple[Hashable, H] | None = None
        self._unkept: set[Hashable] = set()  # keys whose last host was stopped when its world closed
        # idle host or spare -> the answer its server owes (a world's ``close``, a new host's warm-up), read
        # when the host is next taken
        self._closing: dict[int, Answer] = {}
        self._lock = threading.Lock()
        self.closed = False

    @property
    def idle(self) -> int:
        with self._lock:
            return len(self._idle)

    def hosts(self) -> list[H]:
        """Every host the pool has, idle or in use."""
        with self._lock:
            return list(self._live.values())

    def take(self, key: Hashable, warm: Callable[[Hashable, H], Answer | None] | None = None) -> H:
        """A host for a world of this key: an idle one, the warm spare, or a new one. A new spare is sent
        ``warm(key, host)`` as :meth:`prepare` sends it, so its server does that work while the caller's
        world runs; the next world does not get a spare whose reply failed."""
        if self.closed:
            raise EnvError("the runtime is closed")
        host = self._reuse(key)
        if host is not None:
            return host
        with self._lock:
            spare = self._spare if self._spare is not None and self._spare[0] == key else None
            if spare is not None:
                self._spare = None
            warmed = self._closing.pop(id(spare[1]), None) if spare is not None else None
        if spare is None:
            host = self._new(key)
            self._renew_spare(key, warm)
            return host
        self._renew_spare(key, warm)  # the next spare boots while this one's warm-up is read
        if spare[1].alive() and self._closed_cleanly(spare[1], warmed):
            return spare[1]
        self.discard(spare[1])
        return self._new(key)

    def _renew_spare(self, key: Hashable, warm: Callable[[Hashable, H], Answer | None] | None) -> None:
        """Start the spare for the next world of ``key``, if that world will need a new host."""
        if not (self.warm and self._wants_spare(key)):
            return
        fresh = self._new_spare(key, warm)
        with self._lock:
            if self.closed:  # drained meanwhile: the spare is no longer the pool's to keep
                fresh, extra = None, fresh
            else:
                self._spare, extra = fresh, self._spare
        if extra is not None:  # never used (another key's, or another thread's): it waits idle for its key
            self._keep_idle(*extra)

    def _new_spare(self, key: Hashable, warm: Callable[[Hashable, H], Answer | None] | None) -> tuple[Hashable, H] | None:
        """A spare for ``key``, sent ``warm`` (its reply read when the spare is taken); None if it would not start."""
        try:
            host = self._new(key)
        except EnvError:  # the next world will start its own
            return None
        try:
            done = warm(key, host) if warm is not None else None
        except EnvError:
            self.discard(host)
            return None
        if done is not None:
            with self._lock:
                self._closing[id(host)] = done
        return key, host

    def _wants_spare(self, key: Hashable) -> bool:
        """Whether the next world of ``key`` will need a new host: hosts are not reused, or this key's last
        one was stopped (a tainting tool, a lost server, worn out)."""
        with self._lock:
            return self.idle_limit <= 0 or key in self._unkept

    def prepare(self, keys: Iterable[Hashable], warm: Callable[[Hashable, H], Answer | None] | None = None) -> None:
        """Start, side by side, a host for each of these keys that has none waiting (idle or spare), within
        the idle limit; each waits idle for its key's first world. A hint: a host that fails to start is
        left out, and that world starts its own (and says why). ``warm(key, host)`` may send a new host
        work to do before its first world, returning the reply that says it is done (a ``close``), read
        as a world's close is: before the host's next world, which does not get a host whose reply failed."""
        with self._lock:
            if self.closed:
                return
            idle = {key for key, _ in self._idle}
            have = idle | ({self._spare[0]} if self._spare else set())
            room = self.idle_limit - len(self._idle)
        wanted = [key for key in dict.fromkeys(keys) if key not in have]
        if self.fits is not None:  # a world an idle or prepared host of another key fits needs none of its own
            fits = self.fits  # (a spare is taken by its own key only)
            wanted = [key for key in wanted
                      if not any(fits(key, other) for other in idle)
                      and not any(other != key and fits(key, other) and not fits(other, key) for other in wanted)]
        wanted = wanted[:max(0, room)]
        if not wanted:
            return
        try:
            started = self._start_many(wanted)
        except EnvError:
            return
        for key, host in zip(wanted, started):
            if host is None:
                continue
            with self._lock:
                self._live[id(host)] = host
                self._made_for[id(host)] = key
            try:
                done = warm(key, host) if warm is not None else None
            except EnvError:
                self.discard(host)
                continue
            if done is not None:
                with self._lock:
                    self._closing[id(host)] = done
            self._keep_idle(key, host)

    def _keep_idle(self, key: Hashable, host: H) -> None:
        """Keep a healthy host for the next world of its key, stopping the least recently used beyond the limit."""
        evicted: list[H] = []
        with self._lock:
            keep = not self.closed and id(host) in self._live and self.idle_limit > 0
            if keep:
                self._idle.append((key, host))
                while len(self._idle) > self.idle_limit:
                    evicted.append(self._idle.pop(0)[1])
        for old in evicted:
            self.discard(old)
        if not keep:
            self.discard(host)

    def _reuse(self, key: Hashable) -> H | None:
        while True:
            with self._lock:
                index = next((i for i, (idle_key, _) in enumerate(self._idle) if idle_key == key), None)
                if index is None and self.fits is not None:
                    index = next((i for i, (idle_key, _) in enumerate(self._idle) if self.fits(key, idle_key)), None)
                if index is None:
                    return None
                _, host = self._idle.pop(index)
                closing = self._closing.pop(id(host), None)
            if host.alive() and self._closed_cleanly(host, closing):
                return host
            self.discard(host)

    def _closed_cleanly(self, host: H, closing: Answer | None) -> bool:
        """Whether the server tore its last world down (its answer to ``close`` has long arrived)."""
        if closing is None:
            return True
        try:
            closing.result()
        except EnvError:
            return False
        except BaseException:
            self.discard(host)
            raise
        return host.client is not None and not host.client.broken

    def _new(self, key: Hashable) -> H:
        host = self._start(key)
        with self._lock:
            drained = self.closed  # drained from another thread while this host started: nobody would stop it
            if not drained:
                self._live[id(host)] = host
                self._made_for[id(host)] = key
        if drained:
            self._stop(host)
            raise EnvError("the runtime is closed")
        return host

    def give_back(self, key: Hashable, host: H) -> None:
        """A world closed (or failed to load on a healthy server): keep its host for the next world, or stop it."""
        host.worlds += 1
        client = host.client
        keep = (not self.closed and not host.tainted and client is not None and not client.broken and host.alive()
                and self.idle_limit > 0 and not (self.retire is not None and self.retire(host)))
        with self._lock:
            keep = keep and id(host) in self._live
        closing = None
        if keep:
            # The server tears the world down while the caller goes on; the next world of this key reads
            # its answer before loading (the server answers in order), and a failed close stops the host.
            try:
                closing = client.send("close", timeout=self.close_timeout)  # type: ignore[union-attr]
            except EnvError:
                keep = False
            except BaseException:
                self.discard(host)
                raise
        with self._lock:
            if keep:
                self._unkept.discard(key)
                if closing is not None:
                    self._closing[id(host)] = closing
            else:
                self._unkept.add(key)
        if keep:
            with self._lock:
                made_for = self._made_for.get(id(host), key)
            self._keep_idle(made_for, host)  # idle under its own key: a world of that key finds it first
        else:
            self.discard(host)

    def discard(self, host: H) -> None:
        """Stop a host (once, whoever asks first)."""
        with self._lock:
            self._made_for.pop(id(host), None)
            owned = self._live.pop(id(host), None) is not None
            self._closing.pop(id(host), None)
        if owned:
            self._stop(host)

    def drain(self) -> list[H]:
        """Close the pool: no new worlds; returns every host it still has, idle or in use, for the caller to stop."""
        with self._lock:
            self.closed = True
            hosts, self._live, self._spare, self._idle = list(self._live.values()), {}, None, []
            self._made_for.clear()
            self._closing.clear()
        return hosts


class PooledWorld(ServerWorld):
    """A world on a pooled host: a call to an uncontained tool taints the host; a call or snapshot that
    loses the server stops the host at once (nothing of it lingers until the world is closed)."""

    def __init__(self, host: Any, pool: Pool[Any], key: Hashable, call_timeout: float, uncontained: frozenset[str],
                 snapshot_ahead: Reply | None = None):
        assert host.client is not None
        super().__init__(host.client, lambda _client: pool.give_back(key, host), call_timeout, snapshot_ahead)
        self.host = host
        self._pool = pool
        self._uncontained = uncontained

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if request.get("tool") in self._uncontained:
            self.host.tainted = True
        try:
            return super().call(request)
        except (CallTimeout, ServerGone):
            self._pool.discard(self.host)
            raise

    def call_each(self, requests: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, Any] | EnvError]:
        return _discarding(self._pool, self.host, super().call_each(_tainting(self.host, self._uncontained, requests)))

    def snapshot(self) -> dict[str, str]:
        try:
            return super().snapshot()
        except (CallTimeout, ServerGone):
            self._pool.discard(self.host)
            raise


def _tainting(host: Any, uncontained: frozenset[str],
              requests: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """``requests``, each marking the host tainted as it is taken (to be sent) if its tool is uncontained."""
    for request in requests:
        if request.get("tool") in uncontained:
            host.tainted = True
        yield request


def _discarding(pool: Pool[Any], host: Any, outcomes: Iterator[Any]) -> Iterator[Any]:
    """``outcomes``, stopping the host at the first that says its server is lost."""
    for outcome in outcomes:
        if isinstance(outcome, (CallTimeout, ServerGone)):
            pool.discard(host)
        yield outcome


def open_on(pool: Pool[Any], key: Hashable, load: Callable[[Any], Reply | None], call_timeout: float,
            uncontained: frozenset[str], world_class: type[PooledWorld] = PooledWorld,
            keep_after_bad_load: bool = True) -> PooledWorld:
    """Take a host, ``load(host)`` the world on it, and wrap it. A load that fails stops the host, or, with
    ``keep_after_bad_load``, gives a healthy one back (a bad spec leaves the server serving). ``load`` may
    return a snapshot it sent after the load, for the world's first snapshot."""
    pending = begin_on(pool, key, lambda host: lambda: load(host), call_timeout, uncontained, world_class,
                       keep_after_bad_load)
    return pending.result()  # type: ignore[return-value]


def begin_on(pool: Pool[Any], key: Hashable, send: Callable[[Any], Callable[[], Reply | None]],
             call_timeout: float, uncontained: frozenset[str], world_class: type[PooledWorld] = PooledWorld,
             keep_after_bad_load: bool = True, warm: Callable[[Hashable, Any], Answer | None] | None = None
             ) -> PendingWorld:
    """:func:`open_on` in two steps: take a host and ``send(host)`` the world's load now, then, when the
    world is asked for, call what ``send`` returned (it waits for the load's answer, and may return a
    snapshot sent after it) and wrap the world. A load that fails is handled as in :func:`open_on`. The
    world's calls may be sent behind the load before it is asked for (:meth:`PendingWorld.call_each`).
    ``warm`` is what a new spare is sent (:meth:`Pool.take`)."""
    host = pool.take(key, warm)

    def failed(exc: BaseException) -> None:
        healthy = (keep_after_bad_load and isinstance(exc, EnvError) and host.client is not None
                   and not host.client.broken)
        if healthy:
            pool.give_back(key, host)
        else:
            pool.discard(host)

    try:
        confirm = send(host)
    except BaseException as exc:
        failed(exc)
        raise
    report: list[Reply] = []  # a report sent behind the calls sent ahead
    made: list[PooledWorld] = []  # the world, once asked for

    def finish() -> PooledWorld:
        try:
            snapshot_ahead = confirm()
        except BaseException as exc:
            failed(exc)
            raise
        world = world_class(host, pool, key, call_timeout, uncontained, snapshot_ahead)
        made.append(world)
        if report:
            world.report_ahead(report[0])
        return world

    def send_calls(requests: Iterable[Mapping[str, Any]], then_report: bool) -> Iterator[Any]:
        client = host.client
        assert client is not None
        sent: list[Reply | EnvError] = []
        try:
            with client.corked():  # the run's calls and its report in one write
                sent = client.send_each("call", ({"request": dict(request)}
                                                 for request in _tainting(host, uncontained, requests)), call_timeout)
                if then_report and not client.broken:
                    report.append(client.send("report"))
        except EnvError:  # the server is gone: each call's outcome, and the report when asked, say so
            pass
        if report and made:
            made[0].report_ahead(report[0])
        return _discarding(pool, host, results(sent))

    def cancel() -> None:
        try:
            world = pending.result()
        except EnvError:
            return
        world.close()

    pending = PendingWorld(finish, cancel, send_calls)
    return pending


__all__ = ["Host", "Pool", "PooledWorld", "begin_on", "open_on"]
