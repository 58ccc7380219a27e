"""The runtime extension point's interface: where a world runs, and a handle on one open world.

Abstract base classes only, so everything that implements or uses a runtime imports this module and nothing
that would import it back (the registry of runtimes is :mod:`.registry`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable, ClassVar, Iterable, Iterator, Mapping, Sequence

from .domain import Semantics
from .errors import EnvError


class WorldHandle(ABC):
    """One open world in some runtime."""

    @abstractmethod
    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Apply one call request and return the outcome dict."""

    def call_each(self, requests: Iterable[Mapping[str, Any]]) -> Iterator[dict[str, Any] | EnvError]:
        """Apply each request in order, yielding its outcome dict or the :class:`EnvError` its call raised.

        Requests are taken from ``requests`` as the runtime is ready for them, which may be before the
        caller has read the earlier outcomes: a runtime that talks to a server keeps several in flight.
        """
        for request in requests:
            try:
                yield self.call(request)
            except EnvError as exc:
                yield exc

    @abstractmethod
    def snapshot(self) -> dict[str, str]:
        """The world's observable state, keyed by resource id."""

    @abstractmethod
    def close(self) -> None:
        """Tear the world down; the handle is unusable afterwards."""

    def report(self) -> dict[str, Any]:
        """The domains' final reports, by domain name (see ``Domain.final_report``)."""
        return {}

    def __enter__(self) -> "WorldHandle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class PendingWorld:
    """A world whose opening has begun (:meth:`Runtime.open_ahead`)."""

    def __init__(self, finish: Callable[[], WorldHandle], cancel: Callable[[], None] | None = None,
                 send_calls: Callable[[Sequence[Mapping[str, Any]], bool], Iterator[dict[str, Any] | EnvError]]
                 | None = None):
        """``send_calls(requests, then_report)``: a runtime whose world lives in another process sends the
        calls behind the load at once (see :meth:`call_each`); without it they are made when read."""
        self._finish = finish
        self._cancel = cancel
        self._send_calls = send_calls
        self._world: WorldHandle | None = None

    def result(self) -> WorldHandle:
        """The open world; raises what :meth:`Runtime.open_world` would have raised."""
        if self._world is None:
            self._world = self._finish()
        return self._world

    def call_each(self, requests: Sequence[Mapping[str, Any]], *,
                  then_report: bool = False) -> Iterator[dict[str, Any] | EnvError]:
        """The outcomes of ``requests`` applied in order to the world once it is open, as
        :meth:`WorldHandle.call_each` yields them. A runtime whose world lives in another process sends
        them now, right behind the load (and, with ``then_report``, the world's :meth:`~WorldHandle.report`
        behind them), so its server works through the whole run while the caller builds the other world.

        Ask for :meth:`result` before reading the outcomes. A :meth:`~WorldHandle.snapshot` taken then,
        before the first outcome is read, is the world's state before these calls in every runtime; the
        world's own calls come after them. At most once per world.
        """
        if self._send_calls is not None:
            return self._send_calls(requests, then_report)
        return self._made_when_read(requests)

    def _made_when_read(self, requests: Sequence[Mapping[str, Any]]) -> Iterator[dict[str, Any] | EnvError]:
        yield from self.result().call_each(requests)

    def cancel(self) -> None:
        """Give the world up without using it (its host goes back, or is stopped)."""
        if self._cancel is not None:
            self._cancel()


class Runtime(ABC):
    """Where worlds run. Subclasses set ``name`` and implement :meth:`open_world`."""

    name: ClassVar[str]
    notice: str | None = None  # one line: what this runtime isolates less here than it can, and the remedy

    @abstractmethod
    def open_world(self, spec: Mapping[str, Any], semantics: Semantics) -> WorldHandle:
        """Build a fresh world from its spec, in the given semantics."""

    def open_ahead(self, spec: Mapping[str, Any], semantics: Semantics) -> PendingWorld:
        """Begin opening a world, so that a runtime whose worlds live in another process builds it while
        the caller does something else; this default opens it when the result is asked for. Raises
        nothing itself: :meth:`PendingWorld.result` raises what :meth:`open_world` would have."""
        return PendingWorld(lambda: self.open_world(spec, semantics))

    def prepare(self, specs: Iterable[Mapping[str, Any]], semantics: Semantics) -> None:
        """A hint: worlds of these specs are about to be opened, so a runtime that starts a host per world
        may start theirs now, side by side. It never fails; opening a world says what is wrong with it."""

    def close(self) -> None:
        """Release what the runtime holds (pools, daemons)."""

    def __enter__(self) -> "Runtime":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_ahead(runtime: Any, spec: Mapping[str, Any], semantics: Semantics) -> PendingWorld:
    """``runtime.open_ahead``, for any object that opens worlds (one with only ``open_world`` opens the
    world when it is asked for)."""
    ahead = getattr(runtime, "open_ahead", None)
    if ahead is None:
        return PendingWorld(lambda: runtime.open_world(spec, semantics))
    return ahead(spec, semantics)


__all__ = ["PendingWorld", "Runtime", "WorldHandle", "open_ahead"]
