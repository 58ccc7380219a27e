"""The example plug-in distribution (examples/tickets), installed as its own package and found through its
entry point, replays with the same classes under every runtime; the library's conformance suite holds for it.
Bad plug-ins (an entry point that fails to import, a tool that raises something no tool should) are one line
each, and the run goes on."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import textwrap
from importlib import metadata

import pytest

from litmus_replay.envs import conformance
from litmus_replay.envs.domain import domain_class, domain_names
from litmus_replay.envs.runtimes import hosting
from litmus_replay.replay.analysis import analyse
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.scenario import load_scenario

WORLD = {
    "principals": ["alice", "bob"],
    "tickets": {"teams": {"alice": "platform", "bob": "payments"},
                "tickets": {"T-1": {"team": "platform", "title": "certs"}, "T-2": {"team": "payments", "title": "refund"},
                            "T-3": {"team": "platform", "title": "old", "status": "closed"}}},
}
CASES = [
    conformance.Case("tickets-refusals", WORLD, [
        ("list_tickets", {}), ("list_tickets", {"status": "open"}), ("list_tickets", {"status": "maybe"}),
        ("get_ticket", {"id": "T-9"}), ("get_ticket", {"id": 7}), ("close_ticket", {"id": "T-2"}),
        ("close_ticket", {"id": "T-3"}), ("close_ticket", {"id": "T-1", "comment": "done"}),
        ("close_ticket", {"id": "T-1"}), ("close_ticket", {}), ("get_ticket", {"id": "T-1"}),
    ], semantics=("stub", "real")),
    conformance.Case("tickets-bob", WORLD, [("close_ticket", {"id": "T-1"}), ("close_ticket", {"id": "T-2"})],
                     principal="bob"),
]


def test_the_plugin_is_its_own_distribution_found_through_its_entry_point(tickets_plugin):
    distribution = metadata.distribution("litmus-tickets")
    entry = [e for e in distribution.entry_points if e.group == "litmus_replay.domains"]
    assert [(e.name, e.value) for e in entry] == [("tickets", "litmus_tickets.domain")]
    assert "tickets" in domain_names()
    real = domain_class("tickets", "real")
    assert real.__module__ == "litmus_tickets.domain" and real.declaration.in_memory
    assert "site-packages" in sys.modules["litmus_tickets.domain"].__file__  # the installed copy, not the source


@pytest.mark.parametrize("name", ["sandbox", "docker"])
def test_an_isolated_runtime_mounts_the_installed_plugin(tickets_plugin, name):
    plan = hosting.plan(WORLD, "real", name, foreign_python=name == "docker")
    assert plan.inside and plan.imports == ("litmus_tickets.domain",)
    assert [m.target for m in plan.mounts] == ["litmus_tickets"]
    assert plan.mounts[0].source == os.path.dirname(sys.modules["litmus_tickets"].__file__)


def test_the_plugin_conforms_in_every_runtime(tickets_plugin, any_runtime, caplog):
    with caplog.at_level(logging.WARNING, logger="litmus_replay.envs"):
        assert conformance.check(any_runtime, CASES) == {case.name: [] for case in CASES}
    assert not [r for r in caplog.records if "cannot host" in r.getMessage()]  # it ran inside, not here


def test_the_example_scenario_replays_with_the_same_classes_in_every_runtime(tickets_plugin, any_runtime):
    scenario = load_scenario(tickets_plugin / "scenario.yaml")
    [trajectory] = scenario.trajectories
    result = Replayer(scenario.policy, real_runtime=any_runtime).replay(trajectory, scenario.spec.world, scenario.name)
    classes = {call.key: call.pair.cls.value for call in result.calls}
    assert classes == {"t1.c1": "confirmed_safe", "t2.c1": "confirmed_safe", "t2.c2": "proposal_only_misuse"}
    assert analyse(result, scenario).problems == []
    refused = result.calls[2].real
    assert refused is not None and refused.error_code == "403" and not refused.committed


# --- bad plug-ins -----------------------------------------------------------------------------

FAULTY = '''
from litmus_replay.envs.domain import Declaration, Domain, register_domain, tool


class _Faulty(Domain):
    name = "faulty"
    declaration = Declaration(in_memory=True)

    def snapshot(self):
        return {}

    @tool
    def explode(self, call):
        raise RuntimeError("the plug-in has a bug")


@register_domain
class FaultyStub(_Faulty):
    semantics = "stub"


@register_domain
class FaultyReal(_Faulty):
    semantics = "real"
'''

FAULTY_SCENARIO = '''
format_version: 1
name: faulty
world: {principals: [alice], faulty: {}}
policy: {rules: []}
trajectory:
  id: boom
  principal: alice
  turns:
    - calls:
        - {tool: explode, arguments: {}}
'''


def test_bad_plugins_are_one_line_each_and_the_run_goes_on(tickets_plugin, tmp_path):
    """An entry point whose module does not import, and a domain whose tool raises: each is one line on
    stderr; the good scenario still replays and its JSON is written."""
    site = tmp_path / "site"
    dist_info = site / "broken_plugins-0.1.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugins\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(
        "[litmus_replay.domains]\nmissing = litmus_no_such_module_anywhere\nfaulty = faulty_domain\n")
    (site / "faulty_domain.py").write_text(textwrap.dedent(FAULTY))
    scenarios = tmp_path / "scenarios"
    scenarios.mkdir()
    (scenarios / "a-faulty.yaml").write_text(textwrap.dedent(FAULTY_SCENARIO))
    shutil.copy(tickets_plugin / "scenario.yaml", scenarios / "b-tickets.yaml")
    out = tmp_path / "run.json"
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-m", "litmus_replay.replay", "run", str(scenarios), "--runtime", "inprocess",
                           "--json", str(out), "-q"], env=env, capture_output=True, text=True, timeout=300)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    missing = [line for line in lines if "litmus_no_such_module_anywhere" in line]
    faulty = [line for line in lines if "the plug-in has a bug" in line]
    assert len(missing) == 1 and "failed to load" in missing[0], done.stderr
    assert len(faulty) == 1 and "'explode'" in faulty[0] and "RuntimeError" in faulty[0], done.stderr
    assert "Traceback" not in done.stderr
    written = json.loads(out.read_text())
    assert "tickets-close-another-teams-ticket" in json.dumps(written)
    assert "expectations 1/1 met" in done.stdout


def test_the_readme_command_replays_the_example_as_it_says(tickets_plugin, runtime_opener):
    runtime_opener("sandbox").close()  # skip with the reason where the sandbox cannot run
    readme = (tickets_plugin.parents[1] / "docs" / "extending.md").read_text()
    block = readme[readme.index("$ litmus-replay run examples/tickets/scenario.yaml"):]
    command, said = block.splitlines()[:2]
    done = subprocess.run([sys.executable, "-m", "litmus_replay.replay", *command.split()[2:]],
                          cwd=tickets_plugin.parents[1], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == said
