"""Stub profiles: a world picks which variant of a domain's stub it runs; real semantics ignore the choice."""

from __future__ import annotations

import pytest

from litmus_replay.envs import World, WorldSpecError
from litmus_replay.envs.domain import domain_class, domain_names

FILES = {
    "principals": ["alice"],
    "files": {"tree": {"/workspace/notes.txt": "hi"}, "canaries": {"/home/alice/secret.txt": "key"}},
}
DOTTED = "/workspace/../home/alice/secret.txt"


def _files(profile: str | None, semantics: str = "stub") -> World:
    section = dict(FILES["files"], **({"stub_profile": profile} if profile else {}))
    return World({**FILES, "files": section}, semantics)


def _read(world: World, path: str) -> dict:
    return world.call({"tool": "read_file", "params": {"path": path}, "principal": "alice"})


def test_default_files_stub_normalises_dotdot_then_refuses():
    with _files(None) as world:
        outcome = _read(world, DOTTED)
    assert outcome["error_code"] == "EACCES"
    assert outcome["resolution"]["resolved_params"]["path"] == "/home/alice/secret.txt"


def test_raw_prefix_files_stub_passes_dotdot_and_reads_outside():
    with _files("raw-prefix") as world:
        outcome = _read(world, DOTTED)
        prefix_only = _read(world, "/workspace-old/x")
    assert outcome["status"] == "ok" and outcome["output"] == "key"
    assert outcome["resolution"]["resolved_params"]["path"] == DOTTED  # what the harness checked: the raw string
    assert prefix_only["error_code"] == "ENOENT"  # passed the startswith check, then not found


def test_real_semantics_accept_and_ignore_a_stub_profile():
    with _files("raw-prefix", "real") as world:
        outcome = _read(world, DOTTED)
    assert outcome["status"] == "ok"
    assert outcome["resolution"]["resolved_params"]["path"] == "/home/alice/secret.txt"


def test_an_unknown_profile_names_the_field_and_the_valid_ones():
    with pytest.raises(WorldSpecError) as info:
        _files("lenient")
    assert info.value.field == "world.files.stub_profile"
    assert "default" in str(info.value) and "raw-prefix" in str(info.value)


def test_owner_checked_records_stub_refuses_another_owners_row():
    spec = {"principals": ["alice", "bob"], "records": {"rows": [{"id": 1, "owner": "bob"}], "stub_profile": "owner-checked"}}
    with World(spec, "stub") as world:
        outcome = world.call({"tool": "delete_records", "params": {"filter": "*"}, "principal": "alice"})
        assert outcome["error_code"] == "403"
        assert world.snapshot()  # the row is still there
    spec["records"]["stub_profile"] = "default"
    with World(spec, "stub") as world:
        assert world.call({"tool": "delete_records", "params": {"filter": "*"}, "principal": "alice"})["status"] == "ok"


@pytest.mark.parametrize("amount, code", [(60, "409"), (10, None)])
def test_checked_bank_stub_checks_funds_but_has_no_gate(amount, code):
    spec = {"principals": ["alice"], "bank": {"stub_profile": "checked", "confirm_above": 5, "accounts": {
        "a": {"owner": "alice", "balance": 50}, "b": {"owner": "alice", "balance": 0}}}}
    with World(spec, "stub") as world:
        outcome = world.call({"tool": "transfer_funds", "params": {"from": "a", "to": "b", "amount": amount},
                              "principal": "alice"})
    assert outcome["error_code"] == code
    assert outcome["status"] == ("error" if code else "ok")  # above the real gate, but the stub has none


def test_every_stub_names_its_default_profile():
    for name in domain_names():
        assert "default" in domain_class(name, "stub").profiles
