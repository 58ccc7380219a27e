"""The domain extension point: a group of tools sharing state, with a stub and a real semantics.

A domain class is registered under ``(name, semantics)`` with :func:`register_domain`; its tools are
the methods marked with :func:`tool`. A tool method receives the :class:`Call` and the call's
parameters as keyword arguments (a JSON name that is a Python keyword, such as ``from``, arrives as
``from_``), returns the tool's output, and fails by raising ``OSError`` or :class:`ServiceError`.
Other domains can be added through the ``litmus_replay.domains`` entry-point group.

A domain describes what runtimes need to know about it in its :class:`Declaration` (whether its state is
contained, its longest call, the code it needs, the runtimes it supports), so no runtime names a domain.
"""

from __future__ import annotations

import functools
import inspect
import keyword
import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any, Callable, ClassVar, Collection, Literal, Mapping

from .errors import ServiceError, UnknownDomain, WorldSpecError
from .permissions import Checker, Owners
from .plugins import PluginFailure, PluginGroup
from .principal_ids import check_isolable, declared_id, kernel_id
from .thread_ids import become, become_root

Semantics = Literal["stub", "real"]
SEMANTICS: tuple[Semantics, ...] = ("stub", "real")
ENTRY_POINT_GROUP = "litmus_replay.domains"
PROFILE_KEY = "stub_profile"  # in a domain's world section: which of the stub's profiles the world uses
DEFAULT_PROFILE = "default"


NOBODY = 65534


@dataclass
class WorldEnv:
    """What every domain of one world shares: principals, sessions, the world's root, and how the
    principals' ids reach the kernel.

    ``switch_uid``: the world runs isolated (in a sandbox or container) with each call under its
    principal's own uid, so the kernel decides file access; declared id 0 acts there as an unprivileged
    stand-in (:mod:`.principal_ids`), never as the server's uid. Otherwise the process acts for every
    principal with its own uid and nothing is chowned: ``owners`` records who owns each file (so views
    show the declared owners), and with ``shared_uid`` (isolated, every principal on the server's one
    uid) the files domain also checks each principal's permissions itself."""

    principals: dict[str, dict[str, Any]]
    sessions: dict[str, str]
    ambient_session: str | None
    root: Path | None
    facts: dict[str, Any] = field(default_factory=dict)
    isolated: bool = False
    switch_uid: bool = False
    shared_uid: bool = False
    # Processes bounded per world by a pids cgroup; RLIMIT_NPROC would count every world's processes of a uid.
    pids_cgroup: bool = False
    owners: Owners | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.switch_uid:
            check_isolable(self.principals)
        else:
            first = next(iter(self.principals), None)
            self.owners = Owners(self.ids(first) if first is not None else (0, 0))

    def checker(self, principal: str) -> Checker | None:
        """The permission checks a principal's file operations need, where the kernel cannot make them."""
        return Checker(self.owners, self.ids(principal)) if self.shared_uid and self.owners is not None else None

    def session_principal(self, token: str | None) -> str | None:
        """The principal an ambient session token belongs to, or None if it names no live session."""
        if token is None:
            return None
        return self.sessions.get(token)

    def ids(self, principal: str) -> tuple[int, int]:
        """The uid and gid a principal declares; an undeclared principal acts as nobody."""
        attrs = self.principals.get(principal)
        if attrs is None:
            return NOBODY, NOBODY
        return int(attrs["uid"]), int(attrs["gid"])

    def kernel_ids(self, ids: tuple[int, int]) -> tuple[int, int]:
        """The uid and gid the kernel sees for declared ones: where calls switch uid, 0 is the stand-in."""
        if not self.switch_uid:
            return ids
        return kernel_id(ids[0]), kernel_id(ids[1])

    def declared_uid(self, uid: int) -> int:
        """The uid a world declared, for one the kernel reports as an entry's owner."""
        return declared_id(uid) if self.switch_uid else uid

    def acting_as(self, principal: str) -> "_ActingAs":
        """Run the body with the principal's effective uid and gid, so the kernel decides file access.

        Only where ``switch_uid`` is set: an isolated env server running as root in its namespace. The
        world's root (declared uid 0) keeps the server's powers here, so it is root over the world's own
        files; the body is the domains' code, confined to the world's root, and nothing the principal
        supplies runs in this process (a command drops to the stand-in uid before it execs).
        """
        return _ActingAs(self, principal)


class _ActingAs:
    """:meth:`WorldEnv.acting_as` as a plain context manager: it wraps every call, and a generator-based
    one costs several times as much to enter and leave."""

    __slots__ = ("env", "principal", "switched")

    def __init__(self, env: WorldEnv, principal: str):
        self.env, self.principal, self.switched = env, principal, False

    def __enter__(self) -> None:
        uid, gid = self.env.ids(self.principal)
        if not self.env.switch_uid or uid == 0:
            return
        become(*self.env.kernel_ids((uid, gid)))
        self.switched = True

    def __exit__(self, *exc: object) -> None:
        if self.switched:
            self.switched = False
            become_root()


@dataclass
class Call:
    """One tool call as a domain sees it; the domain records its resolution on it."""

    tool: str
    params: dict[str, Any]
    principal: str
    session: str | None = None
    at: float = 0.0
    recorded: dict[str, Any] | None = None  # the recorded result, for stubs that replay it
    acting: str | None = None
    resolved: dict[str, Any] | None = None
    evidence: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    pending: bool = False
    applied: bool = True

    def resolve(self, principal: str | None = None, **resolved: Any) -> None:
        """Record who acts (if not the declared principal) and how parameters resolved."""
        if principal is not None:
            self.acting = principal
        if resolved:
            if self.resolved is None:
                self.resolved = dict(self.params)
            self.resolved.update(resolved)

    def note(self, evidence: str) -> None:
        self.evidence.append(evidence)

    def read(self, *resources: str) -> None:
        """Record resource ids the call read or depended on (a resource id names a subtree too:
        ``profiles:bob`` covers ``profiles:bob/email``), for the causal graph's state edges."""
        self.reads.extend(resources)

    def hold(self, evidence: str) -> None:
        """The call is held at a gate: it answered, but committed nothing yet."""
        self.pending = True
        self.applied = False
        self.note(evidence)

    def replayed(self, evidence: str) -> None:
        """The call repeated an earlier one (an idempotency key): it answered, but committed nothing."""
        self.applied = False
        self.note(evidence)


@dataclass(frozen=True)
class Declaration:
    """What a domain tells the runtimes about itself.

    ``contained``: every bit of its real state lives in the server's memory or under the world root, so the
    next world's load rebuilds it and a sandbox or container that hosted it can be reused. ``in_memory``:
    it keeps all its state in memory and touches no files or processes (implies ``contained``), the
    system's user list included: a sandbox for worlds of such domains alone lists no principals in its
    ``/etc`` and hosts worlds of other principals in turn, and such a world may run in a sandbox made
    for another world (whose ``/etc`` lists that world's principals); a runtime that cannot host it runs its world
    in-process instead, and says so. ``max_call_seconds``: its longest
    call (a runtime's per-call backstop is raised above it); :meth:`Domain.call_seconds` may derive it from
    the world's section. ``code``: the importable modules it needs inside an isolated runtime, made visible
    read-only there; None means the distribution that provides the domain and its dependencies.
    ``runtimes``: the runtimes it can run in; None means every runtime. ``command_root``: its tools run
    commands in a root of their own made from the world (a mount namespace per command), so an isolated
    runtime lets its env server make one (``CAP_SYS_ADMIN`` and ``CAP_SYS_CHROOT`` in the runtime; the
    command itself keeps no capability). ``answers_unknown_tools``: the benchmark it stands for answers a
    call of a tool it does not have, with an error and no change (AgentDojo's tool executor: "Invalid tool
    ... provided."), so a world sends such a call to it and both moments see it refused, rather than
    replaying it as a tool nobody knows (the first such domain in the world's spec answers).
    """

    contained: bool = False
    in_memory: bool = False
    max_call_seconds: float | None = None
    code: tuple[str, ...] | None = None
    runtimes: tuple[str, ...] | None = None
    command_root: bool = False
    answers_unknown_tools: bool = False

    def __post_init__(self) -> None:
        if self.in_memory and not self.contained:
            object.__setattr__(self, "contained", True)
        if self.max_call_seconds is not None and not self.max_call_seconds > 0:
            raise ValueError("Declaration.max_call_seconds must be positive")
        for name in ("code", "runtimes"):
            value = getattr(self, name)
            if value is not None:
                if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
                    raise TypeError(f"Declaration.{name} must be a tuple of names")
                object.__setattr__(self, name, tuple(value))


def tool(method: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a domain method as a tool named after the method."""
    method.__litmus_tool__ = True  # type: ignore[attr-defined]
    return method


class Domain(ABC):
    """A group of tools sharing state, in one semantics.

    Subclasses set ``name`` and ``semantics``, mark tools with :func:`tool`, and implement
    :meth:`snapshot`, from which the world computes every call's effects.
    """

    name: ClassVar[str]
    semantics: ClassVar[Semantics]
    tools: ClassVar[dict[str, Callable[..., Any]]] = {}
    declaration: ClassVar[Declaration] = Declaration()
    # Harnesses' stubs differ: a stub class names the variants it can play (profile -> what it does), and
    # a world picks one per domain with ``stub_profile`` in the domain's section. Real semantics have one.
    profiles: ClassVar[dict[str, str]] = {DEFAULT_PROFILE: "the stub as written"}
    profile: str = DEFAULT_PROFILE

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.tools = {
            name: member
            for klass in reversed(cls.__mro__)
            for name, member in vars(klass).items()
            if getattr(member, "__litmus_tool__", False)
        }

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        self.spec = spec
        self.env = env

    @classmethod
    def call_seconds(cls, section: Mapping[str, Any]) -> float | None:
        """The longest a call can take in a world with this section (by default the declared figure)."""
        return cls.declaration.max_call_seconds

    @abstractmethod
    def snapshot(self) -> dict[str, str]:
        """Resource id -> digest of its observable state, for the effects diff."""

    def unobserved(self) -> str | None:
        """Why the last :meth:`snapshot` saw only part of the state, in words (None: it saw all of it), so
        effects a bounded snapshot could not see are said to be unseen rather than missed in silence."""
        return None

    def values(self, resources: Collection[str]) -> dict[str, Any]:
        """The bounded JSON value (:mod:`.values`) of each named resource as it is now, for the values
        effects carry; a resource without one is left out. By default a domain gives none."""
        return {}

    # Whether :meth:`values_at` can tell the value a resource had at any digest this domain's snapshots
    # reported: then the world asks it for a call's *before* values after the call, instead of learning
    # every resource's value before the first call (a large state mostly left as it was, a benchmark's
    # database, costs that read whole for every run).
    remembers_values: ClassVar[bool] = False

    def values_at(self, digests: Mapping[str, str]) -> dict[str, Any]:
        """The bounded JSON value each resource had when it had the given digest, for a domain that
        :attr:`remembers_values`; a resource without one is left out."""
        return {}

    def view(self) -> Any:
        """The domain's whole state as bounded JSON, for policies' ``state`` (None: nothing to show)."""
        return None

    def close(self) -> None:
        """Release what the domain holds (temporary directories, connections)."""

    def final_report(self) -> dict[str, Any] | None:
        """What the domain has to say about the world's final state once the calls are done (JSON), for
        checks that need that state where it lives; None for nothing."""
        return None

    def invoke(self, call: Call) -> Any:
        """Bind the call's parameters to the tool method and run it."""
        method = self.tools[call.tool]
        kwargs = {_python_name(k): v for k, v in call.params.items()}
        accepted, required = _parameters(method)
        if not (accepted is not None and accepted.issuperset(kwargs) and required.issubset(kwargs)):
            try:  # the binding's own words for what is wrong
                _signature(method).bind(self, call, **kwargs)
            except TypeError as exc:
                raise ServiceError(400, f"{call.tool}: {exc}") from None
        return method(self, call, **kwargs)


@functools.lru_cache(maxsize=None)
def _signature(method: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(method)


@functools.lru_cache(maxsize=None)
def _parameters(method: Callable[..., Any]) -> tuple[frozenset[str] | None, frozenset[str]]:
    """The keyword arguments a tool method takes after ``self`` and ``call`` (None when it is not a plain
    list of named ones) and those it requires: arguments within them bind without asking ``inspect``."""
    parameters = list(_signature(method).parameters.values())[2:]
    plain = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if len(_signature(method).parameters) < 2 or any(p.kind not in plain for p in parameters):
        return None, frozenset()
    return (frozenset(p.name for p in parameters),
            frozenset(p.name for p in parameters if p.default is inspect.Parameter.empty))


def _python_name(param: str) -> str:
    return f"{param}_" if keyword.iskeyword(param) else param


_REGISTRY: dict[tuple[str, Semantics], type[Domain]] = {}
# The built-in domains, each imported (and so registered) when a world first names it: an env server
# hosting a bank world never imports the files domain's pyfakefs or the shell's process machinery.
BUILTIN_DOMAINS = ("bank", "files", "profiles", "records", "shell")  # each in ``domains/<name>.py``
_LOCK = threading.RLock()  # threads (a Dask worker's) must not see the registry half loaded


def register_domain(cls: type[Domain]) -> type[Domain]:
    """Class decorator: make a domain available to worlds under ``(cls.name, cls.semantics)``."""
    if cls.semantics not in SEMANTICS:
        raise ValueError(f"{cls.__name__}.semantics must be one of {SEMANTICS}")
    if not isinstance(cls.declaration, Declaration):
        raise TypeError(f"{cls.__name__}.declaration must be a Declaration")
    with _LOCK:
        _REGISTRY[(cls.name, cls.semantics)] = cls
    return cls


_PLUGINS = PluginGroup(ENTRY_POINT_GROUP, "domain")  # importing a plug-in's module registers its domains


def refresh_plugins() -> list[PluginFailure]:
    """Load the domain entry points installed since the first look (a plug-in installed while running)."""
    _PLUGINS.load(refresh=True)
    return _PLUGINS.failures()


def plugin_errors() -> list[PluginFailure]:
    """The domain entry points that failed to load, each with its reason (empty when all loaded)."""
    return _PLUGINS.failures()


def unknown_domain(name: str) -> UnknownDomain:
    """The error for a domain nobody registered: its plug-in's failure when that is why."""
    return UnknownDomain(name, domain_names(), failure=_PLUGINS.explain(name))


_BUILTINS_LOADED: set[str] = set()


def _load_builtin(name: str) -> None:
    """Import a built-in domain's module the first time a world names it. A class registered under its
    name before (a plug-in's) stands, as it did when the built-ins were imported first."""
    if name not in BUILTIN_DOMAINS or name in _BUILTINS_LOADED:
        return
    with _LOCK:
        earlier = {key: cls for key, cls in _REGISTRY.items() if key[0] == name}
    import_module(f"{__package__}.domains.{name}")  # outside the lock: the module registers as it runs
    with _LOCK:
        _REGISTRY.update(earlier)
        _BUILTINS_LOADED.add(name)


def domain_names() -> list[str]:
    _PLUGINS.load()
    return sorted({name for name, _ in _REGISTRY} | set(BUILTIN_DOMAINS))


def domain_class(name: str, semantics: Semantics) -> type[Domain]:
    """The registered class for a domain and semantics; raises :class:`UnknownDomain` listing the valid ones."""
    _PLUGINS.load()
    _load_builtin(name)
    try:
        return _REGISTRY[(name, semantics)]
    except KeyError:
        raise unknown_domain(name) from None


def domain_pair(name: str) -> dict[Semantics, type[Domain]]:
    """Both classes of a domain a world names, checked to be a pair: registered in both semantics, with the
    same tools. Raises :class:`UnknownDomain` for an unregistered name and :class:`WorldSpecError` (naming
    the world's section) for a half-registered or mismatched one."""
    _PLUGINS.load()
    _load_builtin(name)
    pair = {semantics: _REGISTRY.get((name, semantics)) for semantics in SEMANTICS}
    if not any(pair.values()):
        raise unknown_domain(name)
    missing = [semantics for semantics, cls in pair.items() if cls is None]
    if missing:
        present = next(s for s in SEMANTICS if s not in missing)
        raise WorldSpecError(f"world.{name}", f"domain {name!r} is registered with {present} semantics only; "
                                              f"register a {missing[0]} class for it too")
    stub, real = pair["stub"], pair["real"]
    if set(stub.tools) != set(real.tools):  # type: ignore[union-attr]
        odd = sorted(set(stub.tools) ^ set(real.tools))  # type: ignore[union-attr]
        raise WorldSpecError(f"world.{name}", f"domain {name!r}: its stub and real classes differ in tools "
                                              f"{', '.join(odd)}; both semantics must offer the same tools")
    return pair  # type: ignore[return-value]


def split_profile(name: str, semantics: Semantics, section: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """The stub profile a domain's world section asks for, and the section without it.

    Real semantics accept the key and ignore it, so one world spec serves both twins; an unknown profile
    raises :class:`WorldSpecError` listing the valid ones.
    """
    if PROFILE_KEY not in section:
        return DEFAULT_PROFILE, section
    rest = {key: value for key, value in section.items() if key != PROFILE_KEY}
    profile = section[PROFILE_KEY]
    if semantics == "real":
        return DEFAULT_PROFILE, rest
    valid = domain_class(name, "stub").profiles
    if not isinstance(profile, str) or profile not in valid:
        raise WorldSpecError(f"world.{name}.{PROFILE_KEY}", f"unknown stub profile {profile!r}; choose one of: {', '.join(valid)}")
    return profile, rest


def spec_section(spec: Mapping[str, Any], key: str, field_path: str, kind: type, default: Any) -> Any:
    """Read ``spec[key]`` checking its type, raising :class:`WorldSpecError` naming the field."""
    value = spec.get(key)
    if value is None:  # an absent key and an empty YAML value (`key:`) both mean the default
        value = default
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise WorldSpecError(f"{field_path}.{key}", f"expected {_kind_name(kind)}, got {type(value).__name__}")
    return value


def _kind_name(kind: Any) -> str:
    if isinstance(kind, tuple):
        return " or ".join(_kind_name(k) for k in kind)
    return {dict: "a mapping", list: "a list", str: "a string", int: "an integer", float: "a number", bool: "a boolean"}.get(
        kind, kind.__name__
    )
