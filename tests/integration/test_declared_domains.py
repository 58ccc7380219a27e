"""A domain that declares a long call and extra code runs under both isolated runtimes, neither of which
knows it: the per-call backstop waits for its declared longest call, and its code (and a helper module it
imports) are made visible read-only inside."""

from __future__ import annotations

import os
import sys
import textwrap

import pytest

from litmus_replay.envs import domain as domain_module

DOMAIN = '''
import os
import time

import napkit_helper

from litmus_replay.envs.domain import Declaration, Domain, register_domain, tool


class _Naps(Domain):
    name = "naps"
    declaration = Declaration(contained=True, max_call_seconds=4.0, code=("napkit", "napkit_helper"))

    def __init__(self, spec, env):
        super().__init__(spec, env)
        self.naps = 0

    def snapshot(self):
        return {"naps:count": str(self.naps)}

    @tool
    def nap(self, call, seconds):
        time.sleep(float(seconds))
        self.naps += 1
        return {"helper": napkit_helper.where(), "domain": os.path.dirname(__file__), "naps": self.naps}


@register_domain
class NapsStub(_Naps):
    semantics = "stub"


@register_domain
class NapsReal(_Naps):
    semantics = "real"
'''

HELPER = '''
def where():
    return __file__
'''


@pytest.fixture
def naps_domain(tmp_path, monkeypatch):
    """The domain's package and its helper in two directories of their own, importable here."""
    for root, package, source in (("src", "napkit", DOMAIN), ("lib", "napkit_helper", HELPER)):
        directory = tmp_path / root / package
        directory.mkdir(parents=True)
        os.chmod(tmp_path / root, 0o755)
        os.chmod(directory, 0o755)
        (directory / "__init__.py").write_text(textwrap.dedent(source))
        monkeypatch.syspath_prepend(str(tmp_path / root))
    monkeypatch.setattr(domain_module, "_REGISTRY", dict(domain_module._REGISTRY))
    import napkit  # noqa: F401  (registers the domain here)

    yield
    for name in ("napkit", "napkit_helper"):
        sys.modules.pop(name, None)


@pytest.mark.parametrize("runtime_name", ["sandbox", "docker"])
def test_a_declared_long_call_and_extra_code_run_in_an_isolated_runtime(naps_domain, runtime_opener, runtime_name):
    runtime = runtime_opener(runtime_name, call_timeout=1.0)  # shorter than the nap: only the declaration saves it
    try:
        with runtime.open_world({"principals": ["alice"], "naps": {}}, "real") as world:
            outcome = world.call({"tool": "nap", "params": {"seconds": 2.5}, "principal": "alice"})
            assert outcome["status"] == "ok", outcome
            assert outcome["output"]["helper"] == "/opt/litmus/napkit_helper/__init__.py"  # it ran inside
            assert outcome["output"]["domain"] == "/opt/litmus/napkit"
            assert outcome["committed"] is True
            assert world.snapshot() == {"naps:count": "1"}
    finally:
        runtime.close()


def _pair(name: str, declaration) -> None:
    from litmus_replay.envs.domain import Domain, register_domain, tool

    def count(self, call):
        self.counted = getattr(self, "counted", 0) + 1
        return {"count": self.counted, "pid": os.getpid()}

    for semantics in ("stub", "real"):
        register_domain(type(f"{name}_{semantics}", (Domain,), {
            "name": name, "semantics": semantics, "declaration": declaration,
            "snapshot": lambda self: {f"{name}:count": str(getattr(self, "counted", 0))}, "count": tool(count)}))


@pytest.mark.parametrize("runtime_name", ["sandbox", "docker"])
def test_an_in_memory_domain_that_cannot_run_inside_runs_here_and_says_so_once(monkeypatch, caplog, runtime_opener,
                                                                              runtime_name):
    from litmus_replay.envs.domain import Declaration

    monkeypatch.setattr(domain_module, "_REGISTRY", dict(domain_module._REGISTRY))
    _pair(f"abacus_{runtime_name}", Declaration(in_memory=True, runtimes=("inprocess",)))
    runtime = runtime_opener(runtime_name)
    try:
        for _ in range(2):
            with runtime.open_world({f"abacus_{runtime_name}": {}}, "real") as world:
                outcome = world.call({"tool": "count", "principal": "alice"})
                assert outcome["output"] == {"count": 1, "pid": os.getpid()}  # this process
    finally:
        runtime.close()
    said = [r.getMessage() for r in caplog.records if f"abacus_{runtime_name}" in r.getMessage()]
    assert len(said) == 1 and "\n" not in said[0] and f"the {runtime_name} runtime" in said[0]
    assert "in this process" in said[0]


def test_a_domain_that_cannot_run_inside_and_is_not_in_memory_is_refused_in_one_line(monkeypatch, runtime_opener):
    from litmus_replay.envs import RuntimeUnavailable
    from litmus_replay.envs.domain import Declaration

    monkeypatch.setattr(domain_module, "_REGISTRY", dict(domain_module._REGISTRY))
    _pair("kiln", Declaration(code=("a_module_nobody_installed",)))
    runtime = runtime_opener("sandbox")
    try:
        with pytest.raises(RuntimeUnavailable) as refused:
            runtime.open_world({"kiln": {}}, "real")
    finally:
        runtime.close()
    message = str(refused.value)
    assert "\n" not in message and "'kiln'" in message and "a_module_nobody_installed" in message
