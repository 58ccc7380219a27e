"""Profiles: the real world re-derives the acting principal and the target from the ambient token."""

from __future__ import annotations

import pytest

from litmus_replay.envs import World

SPEC = {
    "principals": ["alice", "bob"],
    "sessions": {"tok-bob": "bob", "tok-alice": "alice"},
    "session": "tok-bob",
    "profiles": {"alice": {"email": "alice@example.com"}, "bob": {"email": "bob@example.com"}},
}


def _update(world: World, **request):
    return world.call({"tool": "update_profile", "params": {"field": "email", "value": "new@example.com"},
                       "principal": "alice", **request})


def test_real_update_lands_on_the_session_owners_record():
    with World(SPEC, "real") as world:
        before = world.snapshot()
        outcome = _update(world)
        assert outcome["resolution"]["principal"] == "bob"
        assert outcome["resolution"]["resolved_params"]["target"] == "bob"
        assert outcome["effects"]["changed"] == ["profiles:bob/email"]
        assert world.snapshot()["profiles:alice/email"] == before["profiles:alice/email"]
        assert any("ambient session token" in line for line in outcome["resolution"]["evidence"])


def test_stub_update_uses_the_declared_principal():
    with World(SPEC, "stub") as world:
        outcome = _update(world)
        assert outcome["resolution"]["principal"] == "alice"
        assert outcome["effects"]["changed"] == ["profiles:alice/email"]


def test_a_request_session_overrides_the_worlds_default():
    with World(SPEC, "real") as world:
        assert _update(world, session="tok-alice")["resolution"]["principal"] == "alice"


@pytest.mark.parametrize("session", ["tok-expired", None])
def test_unknown_session_cannot_be_resolved(session):
    spec = {**SPEC, "session": session}
    with World(spec, "real") as world:
        outcome = _update(world, session=session)
        assert outcome["status"] == "error" and outcome["error_code"] == "401"
        assert outcome["resolution"] is None and not outcome["committed"]
        assert outcome["effects"]["counts"]["total"] == 0


def test_missing_argument_is_a_400_not_a_crash():
    with World(SPEC, "real") as world:
        outcome = world.call({"tool": "update_profile", "params": {"field": "email"}, "principal": "alice"})
        assert (outcome["status"], outcome["error_code"], outcome["committed"]) == ("error", "400", False)
