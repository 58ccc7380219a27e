"""How an isolated runtime hosts a world, read from its domains' declarations (no runtime names a domain).

Both isolated runtimes ask :func:`plan` what a world needs: the code to make visible read-only inside (this
package, pyfakefs, and each domain's declared or installed code), the modules the env server imports to
register the world's plug-in domains, the longest call (so the per-call backstop waits for it), and the
tools that may leave state a world reload does not rebuild (a host that ran one is never reused). A world
whose domains cannot run inside but all keep their state in memory is opened in this process instead, and
the runtime says so once (:func:`open_in_process`).
"""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import threading
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from ..domain import Domain, Semantics, domain_pair
from ..errors import RuntimeUnavailable, WorldSpecError
from ..inprocess import InProcessWorld
from ..interface import WorldHandle
from ..world import World, named_domains, tool_namespace

MOUNT_ROOT = "/opt/litmus"  # on the server's PYTHONPATH in every isolated runtime
ENVS_DIR = Path(__file__).resolve().parent.parent
PACKAGE = "litmus_replay"
OWN_DISTRIBUTION = "litmus-replay"
BACKSTOP_MARGIN = 5.0  # s beyond a world's longest call before the client gives the server up
EXTENSIONS = (".so", ".pyd")

_log = logging.getLogger("litmus_replay.envs")


@dataclass(frozen=True)
class Mount:
    """A host file or directory made visible read-only at ``MOUNT_ROOT/target`` inside."""

    source: str
    target: str

    @property
    def destination(self) -> str:
        return f"{MOUNT_ROOT}/{self.target}"


@dataclass(frozen=True)
class Hosting:
    """What one world needs from an isolated runtime."""

    domains: tuple[str, ...]
    mounts: tuple[Mount, ...]  # beyond the base mounts (this package and pyfakefs)
    imports: tuple[str, ...]  # modules the env server imports before building the world
    call_seconds: float | None  # the world's longest call, if a domain declares one
    uncontained_tools: frozenset[str]  # a call to one may leave state that the next load does not rebuild
    obstacle: str | None  # why the world cannot run inside this runtime, or None
    in_memory: bool  # every domain keeps all its state in memory
    command_root: bool = False  # a domain runs commands in a root made from the world (see Declaration)

    @property
    def inside(self) -> bool:
        return self.obstacle is None

    def call_timeout(self, default: float) -> float:
        """The per-call backstop: the runtime's, or longer than the world's longest call."""
        if self.call_seconds is None:
            return default
        return max(default, self.call_seconds + BACKSTOP_MARGIN)

    def key(self) -> tuple[tuple[Mount, ...], bool]:
        """What a host must have been made with to host this world (its mounts and capabilities are fixed at
        start): its mounts, and whether its server may make a command's root."""
        return self.mounts, self.command_root


@lru_cache(maxsize=2)
def base_mounts(foreign_python: bool = False) -> tuple[Mount, ...]:
    """What every env server needs: this package's ``envs/`` and pyfakefs (the stub files domain); and, for
    a server running this very interpreter (``foreign_python`` False), msgspec, which reads its messages
    three times as fast as the standard library (a server without it reads them as well, more slowly)."""
    spec = importlib.util.find_spec("pyfakefs")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeUnavailable("pyfakefs is not installed (pip install pyfakefs); "
                                 "use --runtime inprocess")
    fakefs = os.path.realpath(list(spec.submodule_search_locations)[0])
    mounts = (Mount(str(ENVS_DIR), f"{PACKAGE}/envs"), Mount(fakefs, "pyfakefs"))
    if foreign_python:  # msgspec is compiled for this interpreter only
        return mounts
    try:
        return mounts + _mounts_for("msgspec", False)
    except LookupError:  # not installed here: the server reads with the standard library
        return mounts


def plan(spec: Mapping[str, Any], semantics: Semantics, runtime: str, *, foreign_python: bool = False) -> Hosting:
    """Read the declarations of the domains ``spec`` names. ``foreign_python``: the server runs another
    interpreter than this one (a container's), so compiled modules cannot be mounted.

    Raises :class:`WorldSpecError` for a spec the world itself would refuse (not a mapping, an unknown or
    half-registered domain, a tool clash), so every runtime refuses it the same way."""
    if not isinstance(spec, Mapping):
        raise WorldSpecError("world", "expected a mapping")
    names = tuple(named_domains(spec))
    pairs = {name: domain_pair(name) for name in names}
    tool_namespace({name: pair[semantics].tools for name, pair in pairs.items()})
    mounts: list[Mount] = []
    imports: list[str] = []
    seconds: list[float] = []
    uncontained: set[str] = set()
    obstacles: list[str] = []
    for name, pair in pairs.items():
        cls = pair[semantics]
        declaration = cls.declaration
        section = spec.get(name) or {}
        limit = cls.call_seconds(section) if isinstance(section, Mapping) else None
        if limit is not None:
            seconds.append(float(limit))
        if not declaration.contained:
            uncontained.update(cls.tools)
        if declaration.runtimes is not None and runtime not in declaration.runtimes:
            obstacles.append(f"domain {name!r} runs only under {', '.join(declaration.runtimes)}")
            continue
        for klass in pair.values():
            if not klass.__module__.startswith(f"{PACKAGE}.envs."):
                imports.append(klass.__module__)
        modules = declaration.code if declaration.code is not None else _installed_code(cls)
        for module in modules:
            try:
                mounts.extend(_mounts_for(module, foreign_python))
            except LookupError as exc:
                obstacles.append(f"domain {name!r} needs {exc.args[0]}")
    return Hosting(
        domains=names,
        mounts=tuple(sorted(set(mounts), key=lambda m: m.target)),
        imports=tuple(dict.fromkeys(imports)),
        call_seconds=max(seconds) if seconds else None,
        uncontained_tools=frozenset(uncontained),
        obstacle="; ".join(obstacles) or None,
        in_memory=bool(pairs) and all(pair[semantics].declaration.in_memory for pair in pairs.values()),  # as World
        command_root=any(pair[semantics].declaration.command_root for pair in pairs.values()),
    )


# --- a domain's code ---------------------------------------------------------------------------


@lru_cache(maxsize=None)
def _installed_code(cls: type[Domain]) -> tuple[str, ...]:
    """The top-level modules of the distribution that provides a domain class, and of its dependencies
    (this project's own distribution and its dependencies excepted: the base mounts cover what the env
    server needs). A domain defined outside any distribution needs its own top-level module."""
    top = cls.__module__.split(".")[0]
    if top == PACKAGE:
        return ()
    distributions = metadata.packages_distributions().get(top, [])
    modules = dict.fromkeys([top])
    for name in distributions:
        for dependency in _closure(name):
            modules.update(dict.fromkeys(_top_level(dependency)))
    return tuple(modules)


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@lru_cache(maxsize=None)
def _closure(distribution: str) -> tuple[str, ...]:
    """A distribution and, recursively, what it requires (unconditionally), stopping at this project."""
    seen: dict[str, None] = {}
    pending = [distribution]
    while pending:
        name = _normal(pending.pop())
        if name in seen or name == OWN_DISTRIBUTION:
            continue
        try:
            requires = metadata.distribution(name).requires or []
        except metadata.PackageNotFoundError:
            continue  # an optional dependency not installed; importing it inside fails like it does here
        seen[name] = None
        for requirement in requires:
            if ";" in requirement and "extra" in requirement.split(";", 1)[1]:
                continue
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
            if match:
                pending.append(match.group(1))
    return tuple(seen)


@lru_cache(maxsize=None)
def _top_level(distribution: str) -> tuple[str, ...]:
    dist = metadata.distribution(distribution)
    listed = dist.read_text("top_level.txt")
    if listed:
        return tuple(line.strip() for line in listed.splitlines() if line.strip() and not line.startswith("_"))
    names: dict[str, None] = {}
    for path in dist.files or ():
        first = path.parts[0]
        if first.endswith((".dist-info", ".egg-info", ".data")) or first in ("..", "__pycache__") or first.startswith("_"):
            continue
        if len(path.parts) == 1:
            if first.endswith(".py"):
                names[first[:-3]] = None
        else:
            names[first] = None
    return tuple(names)


@lru_cache(maxsize=None)
def _mounts_for(module: str, foreign_python: bool) -> tuple[Mount, ...]:
    """Where a module's code lives on this host, and where it goes inside; raises ``LookupError`` (with a
    phrase for the runtime's message) for code that cannot be made visible inside."""
    if module.split(".")[0] == PACKAGE:
        return ()
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        spec = None
    if spec is None:
        raise LookupError(f"module {module!r}, which is not installed here")
    target = module.replace(".", "/")
    if spec.submodule_search_locations:
        locations = [os.path.realpath(p) for p in spec.submodule_search_locations if os.path.isdir(p)]
        if foreign_python and any(_compiled(p) for p in locations):
            raise LookupError(f"module {module!r}, which holds compiled code for this interpreter only")
        if len(locations) == 1:
            return (Mount(locations[0], target),)
        # a namespace package spread over several directories: each of its children on its own
        mounts: list[Mount] = []
        for location in locations:
            for entry in sorted(os.listdir(location)):
                if entry == "__pycache__":
                    continue
                mounts.append(Mount(os.path.join(location, entry), f"{target}/{entry}"))
        return tuple(mounts)
    origin = spec.origin
    if origin is None or not os.path.isfile(origin):
        raise LookupError(f"module {module!r}, which has no file to mount")
    if origin.endswith(EXTENSIONS) or not origin.endswith(".py"):
        if foreign_python:
            raise LookupError(f"module {module!r}, which is compiled for this interpreter only")
        return (Mount(os.path.realpath(origin), f"{'/'.join(target.split('/')[:-1] + [os.path.basename(origin)])}"),)
    return (Mount(os.path.realpath(origin), f"{target}.py"),)


def _compiled(directory: str) -> bool:
    for _, _, files in os.walk(directory):
        if any(name.endswith(EXTENSIONS) for name in files):
            return True
    return False


# --- worlds that cannot run inside -------------------------------------------------------------

_SAID: set[tuple[str, tuple[str, ...]]] = set()
_SAID_LOCK = threading.Lock()


def open_in_process(runtime: str, hosting: Hosting, spec: Mapping[str, Any], semantics: Semantics) -> WorldHandle:
    """Open a world whose domains cannot run inside ``runtime``: in this process if they all keep their
    state in memory (saying once, in one line, where it runs), else raise :class:`RuntimeUnavailable`."""
    if not hosting.in_memory:
        raise RuntimeUnavailable(f"the {runtime} runtime cannot host this world: {hosting.obstacle}; "
                                 "install what it needs, or choose another runtime")
    with _SAID_LOCK:
        first = (runtime, hosting.domains) not in _SAID
        _SAID.add((runtime, hosting.domains))
    if first:
        _log.warning("litmus-replay: the %s runtime cannot host domains %s (%s); they keep all their state in "
                     "memory, so their worlds run in this process", runtime, ", ".join(hosting.domains), hosting.obstacle)
    return InProcessWorld(World(spec, semantics))


__all__ = ["MOUNT_ROOT", "Hosting", "Mount", "base_mounts", "open_in_process", "plan"]
