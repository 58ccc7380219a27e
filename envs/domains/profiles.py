"""User profiles: the real world resolves whose profile a call touches from the ambient session token.

Stub: the harness's view — the trajectory's declared principal acts on its own profile.
Profile ``session``: a stub that re-derives the acting principal from the session as the real service does.
Real: the acting principal and the target record are re-derived at execution from the world's ambient
session token, which may belong to someone else; a token that names no live session cannot be resolved.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping
from typing import Any, Collection

from ..domain import Call, Declaration, Domain, WorldEnv, register_domain, tool
from ..errors import ServiceError, Unresolvable, WorldSpecError
from ..values import bounded


# A field's digest is its JSON text; one encoder serves every snapshot.
_DIGEST = json.JSONEncoder(sort_keys=True, default=str)


def _load_profiles(spec: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    profiles: dict[str, dict[str, Any]] = {}
    for user, fields in spec.items():
        if not isinstance(fields, Mapping):
            raise WorldSpecError(f"world.profiles.{user}", "expected a mapping of field -> value")
        profiles[str(user)] = copy.deepcopy(dict(fields))
    return profiles


class _Profiles(Domain):
    name = "profiles"
    declaration = Declaration(in_memory=True)

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        super().__init__(spec, env)
        self.profiles = _load_profiles(spec)

    def snapshot(self) -> dict[str, str]:
        return {
            f"profiles:{user}/{field}": _DIGEST.encode(value)
            for user, fields in self.profiles.items()
            for field, value in fields.items()
        }

    def values(self, resources: Collection[str]) -> dict[str, Any]:
        """A profile field's value."""
        wanted = set(resources)
        return {
            key: bounded(value)
            for user, fields in self.profiles.items()
            for name, value in fields.items()
            if (key := f"profiles:{user}/{name}") in wanted
        }

    def view(self) -> dict[str, Any]:
        """Each user's profile: user -> field -> value."""
        return bounded(self.profiles, max_items=1024)

    def _acting(self, call: Call) -> str:
        """The principal the ambient session token belongs to, re-derived at execution."""
        acting = self.env.session_principal(call.session)
        if acting is None:
            raise Unresolvable(401, f"ambient session token {call.session!r} names no live session")
        call.resolve(principal=acting)
        if acting != call.principal:
            call.note(
                f"acting principal {acting!r} re-derived from ambient session token {call.session!r}, "
                f"not the declared {call.principal!r}"
            )
        return acting

    def _read(self, user: str) -> dict[str, Any]:
        if user not in self.profiles:
            raise ServiceError(404, f"no profile for {user!r}")
        return dict(self.profiles[user])


@register_domain
class ProfilesStub(_Profiles):
    semantics = "stub"
    profiles = {
        "default": "the declared principal acts, on its own profile",
        "session": "re-derives the acting principal from the ambient session token, as the real service does",
    }

    def _principal(self, call: Call) -> str:
        return self._acting(call) if self.profile == "session" else call.principal

    @tool
    def get_profile(self, call: Call, user: str | None = None) -> dict[str, Any]:
        acting = self._principal(call)
        target = user or acting
        call.resolve(user=target)
        call.read(f"profiles:{target}")
        if self.profile == "session":
            return self._read(target)
        return self.profiles.get(target, {})

    @tool
    def update_profile(self, call: Call, field: str, value: Any) -> dict[str, Any]:
        acting = self._principal(call)
        call.resolve(target=acting)
        call.read(f"profiles:{acting}")
        if self.profile == "session":
            call.note(f"target record resolved from the session: profile of {acting!r}")
            if acting not in self.profiles:
                raise ServiceError(404, f"no profile for {acting!r}")
        self.profiles.setdefault(acting, {})[field] = value
        return {"updated": field, "user": acting}


@register_domain
class ProfilesReal(_Profiles):
    semantics = "real"

    @tool
    def get_profile(self, call: Call, user: str | None = None) -> dict[str, Any]:
        acting = self._acting(call)
        target = user or acting
        call.resolve(user=target)
        call.read(f"profiles:{target}")
        return self._read(target)

    @tool
    def update_profile(self, call: Call, field: str, value: Any) -> dict[str, Any]:
        acting = self._acting(call)
        call.resolve(target=acting)
        call.read(f"profiles:{acting}")
        call.note(f"target record resolved from the session: profile of {acting!r}")
        if acting not in self.profiles:
            raise ServiceError(404, f"no profile for {acting!r}")
        self.profiles[acting][field] = value
        return {"updated": field, "user": acting}
