"""The real world's side of a replay, built again where it is lost mid-run.

A call that outlives its time limit (a command that never ends, a walk of a tree a command blew up) or a
server that dies takes the world with it, and every later call would then be a harness error: a critical
delete after a stalled call would be unscoreable instead of misuse. So the world is built again from its
spec, the calls it had answered are made again in order to bring it back to the state they left, and
the run goes on there. The call that was lost stays a harness error, and says that the world was rebuilt.
A rebuilt world is as faithful as the calls are deterministic; at most :data:`MAX_REBUILDS` per run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from litmus_replay.envs import EnvError, WorldLost
from litmus_replay.envs.runtime import Runtime, WorldHandle, open_ahead

__all__ = ["MAX_REBUILDS", "RealWorld", "final_report"]

MAX_REBUILDS = 2  # each costs the time of the calls made again; a run that loses its world more often is said to


class RealWorld:
    """The outcomes of a run's requests in the real world, in order (see the module docstring)."""

    def __init__(self, runtime: Runtime, spec: Mapping[str, Any], requests: Sequence[Mapping[str, Any]] | None):
        """Begins opening the world and sends it every request (see :meth:`PendingWorld.call_each`); with
        ``requests`` None the requests are not known yet, and each is made as it comes (:meth:`outcome_of`)."""
        self._runtime = runtime
        self._spec = spec
        self._live = requests is None
        self._requests: Sequence[Mapping[str, Any]] = [] if requests is None else requests
        self._pending = open_ahead(runtime, spec, "real")
        self._outcomes: Iterator[dict[str, Any] | EnvError] | None = (
            None if requests is None else self._pending.call_each(requests, then_report=True))
        self._world: WorldHandle | None = None
        self._answered: list[int] = []  # the requests whose effects the current world holds
        self._next = 0
        self.rebuilds: list[str] = []  # one line per rebuild, for the report

    def open(self) -> WorldHandle:
        """The world as first built (raises what opening it raises)."""
        self._world = self._pending.result()
        return self._world

    def cancel(self) -> None:
        self._pending.cancel()

    def next_outcome(self) -> dict[str, Any] | EnvError:
        """The next request's outcome, or the error that kept it from one. A lost world is rebuilt before
        this returns, so the error of the call that lost it is the only one the loss costs."""
        index, self._next = self._next, self._next + 1
        assert self._outcomes is not None, "the requests were not given up front: use outcome_of"
        try:
            reply = next(self._outcomes)
        except StopIteration:
            reply = WorldLost("no outcome for this call")
        return self._kept(index, reply)

    def outcome_of(self, request: Mapping[str, Any]) -> dict[str, Any] | EnvError:
        """A request not known up front, made now: its outcome or the error that kept it from one, a lost
        world rebuilt as in :meth:`next_outcome`."""
        assert self._live, "the requests were given up front: use next_outcome"
        index, self._next = self._next, self._next + 1
        self._requests.append(request)  # type: ignore[attr-defined]
        reply: dict[str, Any] | EnvError
        if self._world is None:
            reply = WorldLost("the world was lost and could not be built again")
        else:
            try:
                reply = self._world.call(request)
            except EnvError as exc:
                reply = exc
        return self._kept(index, reply)

    def _kept(self, index: int, reply: dict[str, Any] | EnvError) -> dict[str, Any] | EnvError:
        if not isinstance(reply, WorldLost):
            self._answered.append(index)
            return reply
        if len(self.rebuilds) >= MAX_REBUILDS:
            return reply
        rebuilt = self._rebuild(index)
        if rebuilt is not None:
            return type(reply)(f"{reply}; {rebuilt}")
        return reply

    def _rebuild(self, lost: int) -> str | None:
        """Build the world again and bring it to the state the answered calls left; what was done, in
        words, or None when the world could not be built again (the later calls then stay lost)."""
        if self._world is not None:
            self._world.close()
        self._world = None
        try:
            world = self._runtime.open_world(self._spec, "real")
        except EnvError:
            return None
        made_again = [self._requests[index] for index in self._answered]
        for outcome in world.call_each(made_again):
            if isinstance(outcome, WorldLost):  # lost again while catching up: give up on this run's world
                world.close()
                return None
        self._world = world
        self._next = lost + 1
        if self._live:
            line = (f"the world was built again from its spec and the {len(made_again)} calls it had answered "
                    f"made again in it, and the later calls made there")
        else:
            self._outcomes = world.call_each(self._requests[lost + 1:])
            line = (f"the world was built again from its spec and the {len(made_again)} calls it had answered "
                    f"made again in it, and the later calls replayed there")
        self.rebuilds.append(line)
        return line

    def report(self) -> dict[str, Any]:
        """The current world's final reports (see :func:`final_report`)."""
        return final_report(self._world)

    def close(self) -> None:
        if self._world is not None:
            self._world.close()
            self._world = None


def final_report(world: WorldHandle | None) -> dict[str, Any]:
    """A world's final reports; a world lost on the way has none (its calls already say why)."""
    if world is None:
        return {"error": "the world was lost"}
    try:
        return world.report()
    except EnvError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
