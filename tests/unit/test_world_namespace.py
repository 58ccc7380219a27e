"""One tool namespace per world: only the domains a world names, in the spec's order, and a clash is an error
naming both domains — whatever ``PYTHONHASHSEED`` is."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from litmus_replay.envs import World, WorldSpecError
from litmus_replay.envs import domain as domain_module
from litmus_replay.envs.domain import Domain, register_domain, tool

# Run in a child interpreter per hash seed: two domains that both offer `read_file` (as AgentDojo's banking
# suite does beside the files domain) and two that both offer `ping`.
SCRIPT = r"""
import json
from litmus_replay.envs import World, WorldSpecError
from litmus_replay.envs.domain import Domain, register_domain, tool

def pair(domain_name, *tools):
    for semantics in ("stub", "real"):
        body = {"name": domain_name, "semantics": semantics, "snapshot": lambda self: {}}
        for tool_name in tools:
            def method(self, call, **params):
                return {"domain": type(self).name}
            method.__name__ = tool_name
            body[tool_name] = tool(method)
        register_domain(type(f"{domain_name}_{semantics}", (Domain,), body))

pair("ledger", "read_file", "ping")
pair("echo", "ping")
answers = {}
for name, spec in {"both": {"ledger": {}, "echo": {}}, "files_and_ledger": {"files": {}, "ledger": {}},
                   "ledger": {"ledger": {}}, "files": {"files": {}}}.items():
    try:
        with World(spec, "stub") as world:
            answers[name] = {"tools": world.tools,
                             "ping": world.call({"tool": "ping", "principal": "a"})["output"] if "ping" in world.tools else None}
    except WorldSpecError as exc:
        answers[name] = {"error": str(exc)}
print(json.dumps(answers, sort_keys=True))
"""


def _answers(seed: str) -> dict:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def test_a_clash_fails_in_one_line_naming_both_domains_and_one_domain_works_under_any_hash_seed():
    first, second = _answers("0"), _answers("4242")
    assert first == second
    both = first["both"]["error"]
    assert "\n" not in both and "'ledger'" in both and "'echo'" in both and "'ping'" in both
    assert both.startswith("world.echo:")  # the section that brought the second offer, in the spec's order
    clash = first["files_and_ledger"]["error"]
    assert "'files'" in clash and "'ledger'" in clash and "'read_file'" in clash
    assert first["ledger"] == {"tools": ["ping", "read_file"], "ping": {"domain": "ledger"}}
    assert "read_file" in first["files"]["tools"] and "ping" not in first["files"]["tools"]


@pytest.fixture
def private_registry(monkeypatch):
    """Domains registered by a test vanish after it."""
    monkeypatch.setattr(domain_module, "_REGISTRY", dict(domain_module._REGISTRY))


def _domain(name: str, semantics: str, *tools: str) -> type[Domain]:
    body = {"name": name, "semantics": semantics, "snapshot": lambda self: {}}
    for tool_name in tools:
        def method(self, call, **params):
            return "pong"
        method.__name__ = tool_name
        body[tool_name] = tool(method)
    return register_domain(type(f"{name}_{semantics}", (Domain,), body))


def test_a_half_registered_plugin_breaks_only_the_worlds_that_name_it(private_registry):
    _domain("halfway", "real", "nudge")
    with World({"files": {}}, "stub") as world:  # never names it: unaffected
        assert "nudge" not in world.tools
    with pytest.raises(WorldSpecError) as caught:
        World({"halfway": {}}, "real")
    assert caught.value.field == "world.halfway"
    assert "real semantics only" in caught.value.message and "stub" in caught.value.message


def test_stub_and_real_must_offer_the_same_tools(private_registry):
    _domain("lopsided", "stub", "a", "b")
    _domain("lopsided", "real", "a")
    with pytest.raises(WorldSpecError, match="differ in tools b"):
        World({"lopsided": {}}, "stub")


def test_a_world_offers_only_the_tools_of_the_domains_it_names():
    with World({"bank": {}}, "stub") as world:
        assert world.domains == ["bank"]
        assert "transfer_funds" in world.tools and "read_file" not in world.tools
        assert world.domain_of("transfer_funds") == "bank"
