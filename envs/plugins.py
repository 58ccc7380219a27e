"""Loading one registry's plug-ins from its entry-point group: once, past any that fail, remembering why.

Every registry (domains, runtimes, adapters, world providers, fidelity spaces) loads its group through a
:class:`PluginGroup`, so a plug-in that fails to import costs only what names it: the registry's lookup
of that name says which plug-in failed and why, in one line, and every other name still works.

It lives in ``envs`` and imports only the standard library (and nothing else of ``envs``): the domain and
runtime registries are in ``envs``, which imports neither ``replay`` nor ``adapters``, and the adapter
registry may import this one module of ``envs`` (the single exception to its import rule), so all five
share it. Nothing is printed and nothing outside this module is changed: a program reads the failures
(:func:`unexplained_failures`) and decides where to say them (the command line prints one note).
"""

from __future__ import annotations

import sys
import threading
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["PluginFailure", "PluginGroup", "unexplained_failures"]


@dataclass(frozen=True)
class PluginFailure:
    """One entry point that could not be loaded: which (name, value, distribution) and why (the error)."""

    kind: str  # what the registry holds: "domain", "runtime", ...
    name: str
    value: str
    distribution: str | None
    error: str  # the exception's type and the first line of its message

    def line(self) -> str:
        source = f"{self.name} = {self.value}" + (f", from {self.distribution}" if self.distribution else "")
        return f"the {self.kind} plug-in {self.name!r} ({source}) failed to load: {self.error}"


_GROUPS: list["PluginGroup"] = []


class PluginGroup:
    """The entry points of one group, loaded on first use. ``accept(name, loaded)`` registers what an entry
    point loaded (a registry whose plug-ins register themselves on import needs none); an exception from
    it is that plug-in's failure too."""

    def __init__(self, group: str, kind: str, accept: Callable[[str, Any], None] | None = None):
        self.group = group
        self.kind = kind
        self._accept = accept
        self._lock = threading.RLock()  # threads (a Dask worker's) must not see a registry half loaded
        self._looked = False
        self._tried: set[tuple[str, str]] = set()  # (name, value): also stops a plug-in loading itself again
        self._failures: dict[str, PluginFailure] = {}
        self._explained: set[str] = set()
        _GROUPS.append(self)

    def load(self, *, refresh: bool = False) -> None:
        """Load every entry point of the group not tried yet; with ``refresh``, look for ones installed since.

        An isolated runtime's env server runs without site (``-S``) from a bare mount of this package: no
        distribution is on its path, and the plug-ins a world needs come by name with its load. It does not
        look (importing ``importlib.metadata`` and scanning the path was about a tenth of a sandbox's start)."""
        with self._lock:
            if self._looked and not refresh:
                return
            self._looked = True
            if sys.flags.no_site:
                return
            from importlib import metadata

            for entry in metadata.entry_points(group=self.group):
                if (entry.name, entry.value) in self._tried:
                    continue
                self._tried.add((entry.name, entry.value))
                try:
                    loaded = entry.load()
                    if self._accept is not None:
                        self._accept(entry.name, loaded)
                except (Exception, SystemExit) as exc:  # one broken plug-in must not take the others down
                    self._failures.setdefault(entry.name, self._failure(entry, exc))

    def _failure(self, entry: Any, exc: BaseException) -> PluginFailure:
        dist = getattr(entry, "dist", None)
        distribution = f"{dist.name} {dist.version}" if dist is not None and dist.name else None
        message = str(exc).strip().splitlines()
        error = f"{type(exc).__name__}: {message[0]}" if message else type(exc).__name__
        return PluginFailure(self.kind, entry.name, entry.value, distribution, error)

    def failures(self) -> list[PluginFailure]:
        """The entry points that failed to load, each with its reason (empty when all loaded)."""
        self.load()
        with self._lock:
            return list(self._failures.values())

    def explain(self, name: str) -> str | None:
        """The one line saying why the plug-in ``name`` failed to load (None when it did not fail): for the
        error of a lookup that asked for it. A failure explained so is not repeated by a general note."""
        self.load()
        with self._lock:
            failure = self._failures.get(name)
            if failure is None:
                return None
            self._explained.add(name)
            return failure.line()


def unexplained_failures() -> list[PluginFailure]:
    """Every failure of the groups loaded so far that no lookup has explained yet (loads nothing new)."""
    found: list[PluginFailure] = []
    for group in list(_GROUPS):
        with group._lock:
            found.extend(failure for name, failure in group._failures.items() if name not in group._explained)
    return found
