"""A world: the domains of one stateful environment, in one semantics, behind a JSON call interface.

``World.call`` takes and returns JSON-shaped dicts, so the same object answers in-process, behind an
env server in a sandbox, or in a container.
"""

from __future__ import annotations

import contextlib
import errno as errno_names
import functools
import os
from dataclasses import replace
from pathlib import Path
from collections.abc import Callable, Mapping
from typing import Any

from .domain import Call, Domain, Semantics, WorldEnv, domain_names, domain_pair, split_profile, unknown_domain
from .errors import DomainFault, ServiceError, UnknownTool, Unresolvable, WorldSpecError
from .rootfs import private_root, remove_tree
from .outcome import MAX_VALUES, Effects, Outcome, Resolution
from .values import ValueCache, json_copy

COMMON_KEYS = {"principals", "session", "sessions", "facts"}
FIRST_UID = 10001
MEMORY_FS = "/dev/shm"
MEMORY_FS_ROOM = 1024 * 1024 * 1024  # free bytes a memory filesystem must have to hold worlds


@functools.lru_cache(maxsize=None)
def scratch_dir() -> str | None:
    """Where a world's own directory is made: a memory filesystem with room to spare where there is one
    (as a sandbox's ``/world`` is) and ``TMPDIR`` does not say otherwise, because on a disk filesystem
    removing a world's directories costs about a millisecond each; else the default temporary directory."""
    if "TMPDIR" in os.environ:
        return None
    try:
        usable = os.path.isdir(MEMORY_FS) and os.access(MEMORY_FS, os.W_OK | os.X_OK)
        stat = os.statvfs(MEMORY_FS) if usable else None
        free = stat.f_bavail * stat.f_frsize if stat else 0
    except OSError:
        return None
    return MEMORY_FS if free >= MEMORY_FS_ROOM else None


def parse_principals(value: Any) -> dict[str, dict[str, Any]]:
    """Principals as a list of names or a mapping name -> {uid, gid, roles}; uids default from 10001."""
    if value is None:
        return {}
    if isinstance(value, list):
        value = {name: {} for name in value}
    if not isinstance(value, dict):
        raise WorldSpecError("world.principals", "expected a list of names or a mapping")
    principals: dict[str, dict[str, Any]] = {}
    for index, (name, attrs) in enumerate(value.items()):
        if not isinstance(name, str):
            raise WorldSpecError("world.principals", f"principal name {name!r} is not a string")
        if attrs is not None and not isinstance(attrs, Mapping):
            raise WorldSpecError(f"world.principals.{name}", "expected a mapping of uid, gid, roles")
        attrs = dict(attrs or {})
        uid = attrs.setdefault("uid", FIRST_UID + index)
        attrs.setdefault("gid", uid)
        roles = attrs.setdefault("roles", [])
        for key in ("uid", "gid"):
            if not isinstance(attrs[key], int) or isinstance(attrs[key], bool) or not 0 <= attrs[key] < 2**31:
                raise WorldSpecError(f"world.principals.{name}.{key}", "expected a non-negative integer")
        if not isinstance(roles, list) or not all(isinstance(role, str) for role in roles):
            raise WorldSpecError(f"world.principals.{name}.roles", "expected a list of strings")
        principals[name] = attrs
    return principals


def named_domains(spec: Mapping[str, Any]) -> list[str]:
    """The domains a world spec names, in its order; raises :class:`WorldSpecError` for an unknown section."""
    known = domain_names()
    named = [key for key in spec if key not in COMMON_KEYS]
    for key in named:
        if key not in known:
            failure = unknown_domain(key).failure  # a plug-in domain that failed to load says why
            raise WorldSpecError(
                f"world.{key}", failure or f"unknown section; expected one of {', '.join(sorted(COMMON_KEYS | set(known)))}"
            )
    return named


def tool_namespace(domain_tools: Mapping[str, Any]) -> dict[str, str]:
    """Tool name -> domain, over the given domains (``name -> tool names``) in their order; raises
    :class:`WorldSpecError` naming both domains when two offer the same tool name."""
    namespace: dict[str, str] = {}
    for domain, tools in domain_tools.items():
        for tool_name in tools:
            other = namespace.setdefault(tool_name, domain)
            if other != domain:
                raise WorldSpecError(f"world.{domain}", f"tool {tool_name!r} is offered by both domains {other!r} "
                                                        f"and {domain!r}; a world may name only one of them")
    return namespace


class World:
    """The stateful environment a trajectory acts on, in one semantics.

    ``root`` is the directory that holds the world's filesystem (real semantics); by default a fresh
    temporary directory that :meth:`close` removes. ``isolated`` says the world runs in a sandbox or
    container (domains that execute recorded content, such as the shell, refuse to run otherwise);
    ``switch_uid`` runs each real call with the declared principal's uid and gid; ``shared_uid`` says
    the principals share this process's uid, so the files domain checks permissions itself;
    ``pids_cgroup`` says the world's processes are bounded by its container's pids cgroup, and a uid's
    process count (RLIMIT_NPROC) is shared with other worlds, so commands are not bounded by it.
    ``make_root``, given instead of ``root``, makes the directory only for a world that will keep files
    (an env server's worlds: one whose domains all keep their state in memory costs no directory).
    """

    def __init__(
        self,
        spec: Mapping[str, Any],
        semantics: Semantics,
        root: Path | None = None,
        *,
        isolated: bool = False,
        switch_uid: bool = False,
        shared_uid: bool = False,
        pids_cgroup: bool = False,
        make_root: Callable[[], Path] | None = None,
    ):
        if not isinstance(spec, Mapping):
            raise WorldSpecError("world", "expected a mapping")
        self.spec = spec
        self.semantics = semantics
        named = named_domains(spec)
        sessions = spec.get("sessions") or {}
        if not isinstance(sessions, dict):
            raise WorldSpecError("world.sessions", "expected a mapping token -> principal")
        facts = spec.get("facts") or {}
        if not isinstance(facts, dict):
            raise WorldSpecError("world.facts", "expected a mapping")
        if "principals" in facts:
            raise WorldSpecError("world.facts.principals", "reserved: policies see the world's principals there")
        if spec.get("session") is not None and not isinstance(spec.get("session"), str):
            raise WorldSpecError("world.session", "expected a session token (a string)")
        classes = {name: domain_pair(name)[semantics] for name in named}
        # No directory for a world whose domains all keep their state in memory (AgentDojo's environments).
        needs_root = root is None and semantics == "real" and not (
            classes and all(cls.declaration.in_memory for cls in classes.values()))
        self._owns_root = needs_root and make_root is None
        if self._owns_root:
            root = private_root("litmus-world-", scratch_dir())
        elif needs_root and make_root is not None:
            root = make_root()
        self.env = WorldEnv(
            principals=parse_principals(spec.get("principals")),
            sessions={str(k): str(v) for k, v in sessions.items()},
            ambient_session=spec.get("session"),
            root=root,
            facts=facts,
            isolated=isolated,
            switch_uid=switch_uid and semantics == "real",
            shared_uid=shared_uid and semantics == "real",
            pids_cgroup=pids_cgroup,
        )
        self._classes = classes
        self._tool_domain = tool_namespace({name: cls.tools for name, cls in self._classes.items()})
        self._answers_unknown = next((name for name, cls in classes.items()
                                      if cls.declaration.answers_unknown_tools), None)
        self._domains: dict[str, Domain] = {}
        self._values = ValueCache()
        # A domain's state changes only in its own calls, unless a domain that is not contained (a shell)
        # may reach into it: then each call reads its domain's state afresh.
        self._reuse_snapshots = all(cls.declaration.contained for cls in classes.values())
        # the last call's domain, its state after, and whether every value of that state is known
        self._last: tuple[str, dict[str, str], bool, str | None] | None = None  # domain, state, values known, unobserved
        self._clock = 0.0
        try:
            for name in named:
                self._domain(name)
        except BaseException:  # a malformed section: leave nothing behind
            self.close()
            raise

    @property
    def tools(self) -> list[str]:
        """The tools of the domains this world's spec names (one namespace: no name belongs to two)."""
        return sorted(self._tool_domain)

    @property
    def domains(self) -> list[str]:
        """The domains this world's spec names, in the spec's order."""
        return list(self._classes)

    def domain_of(self, tool_name: str) -> str:
        """The domain that provides a tool (or answers tools it lacks: ``Declaration.answers_unknown_tools``);
        raises :class:`UnknownTool` listing the world's tools."""
        try:
            return self._tool_domain[tool_name]
        except KeyError:
            if self._answers_unknown is not None:
                return self._answers_unknown
            raise UnknownTool(tool_name, self.tools) from None

    def _domain(self, name: str) -> Domain:
        domain = self._domains.get(name)
        if domain is None:
            section = self.spec.get(name) or {}
            if not isinstance(section, Mapping):
                raise WorldSpecError(f"world.{name}", "expected a mapping")
            profile, section = split_profile(name, self.semantics, section)
            domain = self._classes[name](section, self.env)
            domain.profile = profile
            self._domains[name] = domain
        return domain

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """Apply one call: ``{"tool", "params", "principal", "session"?, "at"?, "recorded"?, "state"?}`` ->
        outcome dict; with ``"state": true`` the dict also holds the world's :meth:`view` after the call,
        so a policy that reads the world's state costs no extra round trip."""
        outcome = self.apply(request).to_dict()
        if request.get("state"):
            outcome["state"] = self.view()
        return outcome

    def apply(self, request: Mapping[str, Any]) -> Outcome:
        tool_name = request["tool"]
        name = self.domain_of(tool_name)
        domain = self._domain(name)
        last, self._last = self._last, None
        self._clock = float(request.get("at", self._clock + 1.0))
        session = request.get("session", self.env.ambient_session)
        call = Call(
            tool=tool_name,
            params=dict(request.get("params") or {}),
            principal=request["principal"],
            session=session,
            at=self._clock,
            recorded=request.get("recorded"),
        )
        if last is not None and last[0] == name:
            before, unseen_before = last[1], last[3]
        else:
            before, unseen_before = domain.snapshot(), domain.unobserved()
        remembers = domain.remembers_values  # it tells a call's values before it afterwards (Domain.values_at)
        if remembers or (last is not None and last[0] == name and last[2]):
            known = True  # the state the last call left, whose every value is known: its refresh and update saw to it
        else:
            known = self._values.refresh(domain, before)
        output: Any = None
        status, error_code, error, resolved = "ok", None, None, True
        try:
            with self.env.acting_as(call.principal):
                output = domain.invoke(call)
        except Unresolvable as exc:
            status, error_code, error, resolved = "error", str(exc.status), exc.message, False
        except ServiceError as exc:
            status, error_code, error = "error", str(exc.status), exc.message
        except (TypeError, ValueError, KeyError) as exc:
            # Recorded arguments are arbitrary JSON: a value of the wrong shape is the caller's error, as a
            # real service would answer it, never a crash of the world.
            status, error_code, error = "error", "400", f"bad arguments: {type(exc).__name__}: {exc}"
        except OSError as exc:
            code = errno_names.errorcode.get(exc.errno or 0, "EIO")
            status, error_code, error = "error", code, f"[Errno {exc.errno}] {exc.strerror or code}: {exc.filename or ''}".rstrip(": ")
        except Exception as exc:  # a domain's bug is not the environment's answer: no outcome, one line
            raise DomainFault(domain.name, tool_name, exc) from exc
        after = domain.snapshot()
        unseen_after = domain.unobserved()
        effects = Effects.between(before, after)
        if self._reuse_snapshots:  # values are learnt below for at most MAX_VALUES of what the call touched
            self._last = (name, after, known and len(effects.affected) <= MAX_VALUES, unseen_after)
        if not effects.empty:
            touched = effects.affected[:MAX_VALUES]
            if remembers:
                effects = effects.with_values(domain.values_at({key: before[key] for key in touched if key in before}),
                                              domain.values([key for key in touched if key in after]))
            else:
                effects = effects.with_values(self._values.known(before, touched), self._values.update(domain, after, touched))
        if unseen_before or unseen_after:
            effects = replace(effects, unobserved=unseen_after or unseen_before)
        output = _as_json(output)
        if status == "ok":
            committed = call.applied
            if call.pending:
                status = "pending"
        else:
            committed = not effects.empty
        resolution = None
        if resolved:
            resolution = Resolution(
                principal=call.acting or call.principal,
                resolved_params=call.resolved if call.resolved is not None else dict(call.params),
                evidence=tuple(call.evidence),
                reads=tuple(dict.fromkeys(call.reads)),
            )
        return Outcome(
            status=status,
            committed=committed,
            output=output,
            error_code=error_code,
            error=error,
            effects=effects,
            resolution=resolution,
        )

    def report(self) -> dict[str, Any]:
        """Each domain's final report, by domain name (only the domains that have one)."""
        reports = {}
        for name, domain in self._domains.items():
            report = domain.final_report()
            if report is not None:
                reports[name] = _as_json(report)
        return reports

    def snapshot(self) -> dict[str, str]:
        """The observable state of every domain in use, keyed by resource id."""
        state: dict[str, str] = {}
        for domain in self._domains.values():
            state.update(domain.snapshot())
        return state

    def view(self) -> dict[str, Any]:
        """Every domain in use's state as bounded JSON, by domain name: what policies read as ``state``."""
        views = {name: domain.view() for name, domain in self._domains.items()}
        return _as_json({name: view for name, view in views.items() if view is not None})

    def close(self) -> None:
        for domain in self._domains.values():
            domain.close()
        self._domains.clear()
        if self._owns_root and self.env.root is not None:
            with contextlib.suppress(OSError):
                remove_tree(self.env.root.parent)

    def __enter__(self) -> "World":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _as_json(value: Any) -> Any:
    """A JSON copy of a tool's output: what an env server would send, and never an alias of live state."""
    return json_copy(value)
