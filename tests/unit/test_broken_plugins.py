"""A plug-in that fails to import costs only what names it: for each registry's entry-point group, an installed
distribution whose module raises on import leaves ``--help`` and unrelated commands working, and the command
that names it says which plug-in failed and why in one line, exit 2. The command line runs in a child process
with the fake distribution on its ``PYTHONPATH``, as a user's broken install would be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from litmus_replay.envs.plugins import PluginGroup

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "core" / "benign-run.yaml"
WHY = "ImportError: this plug-in is broken on purpose"

GROUPS = {  # kind -> (entry-point group, the entry point's value)
    "runtime": ("litmus_replay.runtimes", "broken_plugin"),
    "adapter": ("litmus_replay.adapters", "broken_plugin"),
    "domain": ("litmus_replay.domains", "broken_plugin"),
    "world provider": ("litmus_replay.worlds", "broken_plugin:Provider"),
    "fidelity space": ("litmus_replay.fidelity", "broken_plugin:SPACE"),
}

BROKEN_DOMAIN_SCENARIO = """\
format_version: 1
name: names-a-broken-domain
world: {principals: [alice], broken: {}}
policy: {rules: []}
trajectory:
  id: t
  principal: alice
  turns:
    - calls:
        - {tool: anything, arguments: {}}
"""

MESSAGES_RUN = {"model": "m", "messages": [
    {"role": "user", "content": "Read my notes."},
    {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "/n"}}]},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "hello"}]},
]}


def install(site: Path, entry_points: str, modules: dict[str, str]) -> Path:
    """A distribution ``broken-plugins 0.1`` in ``site``: its entry points and its modules, no pip needed."""
    dist_info = site / "broken_plugins-0.1.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text("Metadata-Version: 2.1\nName: broken-plugins\nVersion: 0.1\n")
    (dist_info / "entry_points.txt").write_text(entry_points)
    for name, text in modules.items():
        (site / f"{name}.py").write_text(text)
    return site


def _with_site(site: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}


def cli(site: Path, *args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "litmus_replay.replay", *args], cwd=cwd, env=_with_site(site),
                          capture_output=True, text=True, timeout=300)


def python(site: Path, code: str) -> list[str]:
    """The lines ``code`` prints in a fresh interpreter that sees the distribution in ``site``."""
    done = subprocess.run([sys.executable, "-c", code], env=_with_site(site), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def stderr_lines(done: subprocess.CompletedProcess) -> list[str]:
    return [line for line in done.stderr.splitlines() if line.strip()]


def naming_command(kind: str, tmp_path: Path, site: Path) -> subprocess.CompletedProcess:
    """The command that needs the broken plug-in of this kind."""
    if kind == "runtime":
        return cli(site, "check", "--runtime", "broken", str(SCENARIO))
    if kind == "adapter":
        run = tmp_path / "messages.json"
        run.write_text(json.dumps(MESSAGES_RUN))
        return cli(site, "revalidate", str(run), "--format", "broken", "--runtime", "inprocess", "--jobs", "1",
                   "--out", str(tmp_path / "out"))
    if kind == "domain":
        scenario = tmp_path / "broken-domain.yaml"
        scenario.write_text(BROKEN_DOMAIN_SCENARIO)
        return cli(site, "check", "--runtime", "inprocess", str(scenario))
    assert kind == "fidelity space"
    return cli(site, "fidelity", "broken")


def revalidate_a_run_of_its_benchmark(tmp_path: Path, site: Path) -> subprocess.CompletedProcess:
    run = tmp_path / "messages.json"
    run.write_text(json.dumps(MESSAGES_RUN))
    return cli(site, "revalidate", str(run), "--task", "broken/suite", "--runtime", "inprocess", "--jobs", "1",
               "--reports", "none", "--out", str(tmp_path / "out"))


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(GROUPS))
def test_a_broken_plugin_costs_only_the_command_that_names_it(kind, tmp_path):
    group, value = GROUPS[kind]
    site = install(tmp_path / "site", f"[{group}]\nbroken = {value}\n",
                   {"broken_plugin": "raise ImportError('this plug-in is broken on purpose')\n"})

    helped = cli(site, "--help")
    assert helped.returncode == 0 and "Usage" in helped.stdout, helped.stderr
    assert "Traceback" not in helped.stderr

    unrelated = cli(site, "check", "--runtime", "inprocess", str(SCENARIO))
    assert unrelated.returncode == 0, unrelated.stderr
    assert "ok" in unrelated.stdout and "Traceback" not in unrelated.stderr
    assert len([line for line in stderr_lines(unrelated) if "broken_plugin" in line]) <= 1  # a note, at most

    said = f"the {kind} plug-in 'broken' (broken = {value}, from broken-plugins 0.1) failed to load: {WHY}"
    if kind == "world provider":  # it is named by the runs of its benchmark: they have no world, and say why
        batch = revalidate_a_run_of_its_benchmark(tmp_path, site)
        assert batch.returncode == 3, batch.stderr  # re-run once the plug-in is mended, the run is retried
        (line,) = [json.loads(text) for text in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
        assert line["status"] == "missing_world" and said in line["error"]
        assert "Traceback" not in batch.stderr
        return
    named = naming_command(kind, tmp_path, site)
    assert named.returncode == 2, named.stdout + named.stderr
    (line,) = stderr_lines(named)  # the plug-in's failure is the error: no note repeats it
    assert said in line


GOOD_ADAPTER = """\
from litmus_replay.adapters import Adapter, register_adapter


@register_adapter
class GoodAdapter(Adapter):
    name = "good-plugin-format"

    def load(self, path):
        return []
"""


def test_a_broken_entry_point_does_not_stop_the_next_one_of_its_group(tmp_path):
    """In one distribution, a broken adapter listed before a good one, and the same for world providers:
    each registry lists the good one, and says why the broken one is missing."""
    site = install(tmp_path / "site",
                   "[litmus_replay.adapters]\na_broken = broken_plugin\nb_good = good_adapter\n"
                   "[litmus_replay.worlds]\na_broken = broken_plugin:Provider\nb_good = good_provider:Provider\n",
                   {"broken_plugin": "raise ImportError('this plug-in is broken on purpose')\n",
                    "good_adapter": GOOD_ADAPTER,
                    "good_provider": "class Provider:\n    name = 'b_good'\n"})
    code = ("from litmus_replay.adapters import adapter_names, get_adapter\n"
            "from litmus_replay.replay.worlds import provider_names\n"
            "print('good-plugin-format' in adapter_names(), {'a_broken', 'b_good'} <= set(provider_names()))\n"
            "try:\n    get_adapter('a_broken')\nexcept LookupError as exc:\n    print(exc)\n")
    listed, said = python(site, code)
    assert listed == "True True"
    assert said == f"the adapter plug-in 'a_broken' (a_broken = broken_plugin, from broken-plugins 0.1) failed to load: {WHY}"


def test_the_loader_tries_each_entry_point_once_and_keeps_going(tmp_path, monkeypatch):
    site = install(tmp_path / "site", "[litmus_replay.test_group]\na = never_loads\nb = loads_fine:VALUE\n",
                   {"never_loads": "import sys\nsys.modules['tried'] = sys.modules.get('tried', 0) + 1\n"
                                   "raise SystemExit('quits on import')\n",
                    "loads_fine": "VALUE = 42\n"})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, "tried", raising=False)
    accepted: dict[str, object] = {}
    group = PluginGroup("litmus_replay.test_group", "test", accept=accepted.__setitem__)
    environ = dict(os.environ)
    group.load()
    group.load()
    assert accepted == {"b": 42}
    assert sys.modules["tried"] == 1  # not imported again on the next look
    (failure,) = group.failures()
    assert (failure.name, failure.value, failure.error) == ("a", "never_loads", "SystemExit: quits on import")
    assert group.explain("a") == failure.line() and group.explain("b") is None
    assert dict(os.environ) == environ  # what failed is kept here, not in the process's environment


def test_a_broken_domain_plugin_is_remembered_without_touching_the_environment(tmp_path, monkeypatch):
    from litmus_replay.envs.domain import domain_class, refresh_plugins
    from litmus_replay.envs.errors import UnknownDomain

    site = install(tmp_path / "site", "[litmus_replay.domains]\nbroken_for_this_test = broken_plugin_for_test\n",
                   {"broken_plugin_for_test": "raise ImportError('this plug-in is broken on purpose')\n"})
    monkeypatch.syspath_prepend(str(site))
    environ = dict(os.environ)
    failures = refresh_plugins()
    assert any(f.name == "broken_for_this_test" and f.error == WHY for f in failures)
    assert dict(os.environ) == environ
    with pytest.raises(UnknownDomain, match="the domain plug-in 'broken_for_this_test'.*failed to load"):
        domain_class("broken_for_this_test", "stub")
    with pytest.raises(UnknownDomain, match="unknown domain 'no_such_domain'; known domains: .*bank"):
        domain_class("no_such_domain", "stub")
