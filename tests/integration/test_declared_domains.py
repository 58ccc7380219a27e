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
