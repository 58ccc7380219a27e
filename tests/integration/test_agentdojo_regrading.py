"""litmus-replay's replayed benchmark checks are AgentDojo's own: every run of the shipped AgentDojo runs is
re-validated by ``litmus-replay revalidate RUNS --format agentdojo``, and re-graded beside it by AgentDojo's
own machinery (``benchmarks/agentdojo_regrade.py``: the environment with the run's injections, every
recorded call through AgentDojo's ``FunctionsRuntime``, its utility and security checks), in the version the
result line says the checks were replayed in (its ``world``). Per run and check, the line's ``replayed`` is
the value AgentDojo's re-grading gives, scored as AgentDojo's ``benchmark.py`` scores it.

The folders: the 160 runs shipped in ``tests/fixtures/external/agentdojo-runs/``, always; and the 2,000
runs of ``agentdojo-runs-more/`` in the fixtures kept beside the checkout
(``../shared/fixtures/external/``), where that folder is there: the test has one case per folder present.

A run without checks in its line must be one AgentDojo's ``benchmark.py`` scores nothing for either (it
recorded an error), or one with no tool call (nothing replayed: the benchmark's verdict stands, and
``revalidate`` names no world for it). Differences known and explained are listed in :data:`KNOWN`, each
with its cause; a difference not listed fails, and so does a listed one that no longer differs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("agentdojo")

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "benchmarks"))  # the re-grading the benchmark times, shared (last: it shadows nothing)

import agentdojo_regrade as regrading  # noqa: E402

FOLDERS = [ROOT / "tests" / "fixtures" / "external" / "agentdojo-runs",
           ROOT.parent / "shared" / "fixtures" / "external" / "agentdojo-runs-more"]
PRESENT = [folder for folder in FOLDERS if folder.is_dir()]

# Run (its path under its folder, without .json) -> why litmus-replay's replayed checks differ from
# AgentDojo's own re-grading of the run. Empty: none differs.
KNOWN: dict[str, str] = {}


def revalidate(runs: Path, out: Path) -> dict[Path, dict]:
    command = [sys.executable, "-m", "litmus_replay", "revalidate", str(runs), "--format", "agentdojo",
               "--out", str(out), "--runtime", "inprocess", "--jobs", "2", "--reports", "none", "--quiet"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode in (0, 3), done.stderr[-2000:]  # 3: a run without a world, listed below
    return regrading.result_lines(out, ROOT)


@pytest.mark.parametrize("folder", PRESENT, ids=[folder.name for folder in PRESENT])
def test_every_replayed_check_is_agentdojos_own_regrading(folder, tmp_path):
    files = sorted(path.resolve() for path in folder.rglob("*.json"))
    lines = revalidate(folder, tmp_path / "out")
    assert sorted(lines) == files  # one line per run, none lost

    differences: dict[str, tuple[dict, dict]] = {}
    compared = {"runs": 0, "checks": 0, "no_tool_calls": 0, "error": 0}
    versions = {path: regrading.world_version(lines[path].get("world")) for path in files}
    graded = [(path, version) for path, version in versions.items() if version is not None]
    theirs_by_run = dict(zip((path for path, _ in graded), regrading.regrade_all(graded, jobs=2)))
    for path in files:
        line = lines[path]
        name = path.relative_to(folder.resolve()).with_suffix("").as_posix()
        replayed = {check: entry["replayed"] for check, entry in (line.get("checks") or {}).items()}
        if versions[path] is None:
            run = json.loads(path.read_bytes())
            if line["status"] == "no_tool_calls":
                compared["no_tool_calls"] += 1
            elif line["status"] == "ok" and not replayed and not regrading.scored(run, {"utility": True, "security": True}):
                compared["error"] += 1  # recorded an error: benchmark.py compares nothing
            else:
                differences[name] = ({"status": line["status"], "checks": replayed}, {"world": line.get("world")})
            continue
        theirs = theirs_by_run[path]
        assert "skip" not in theirs, (name, versions[path], theirs)
        compared["runs"] += 1
        compared["checks"] += len(theirs["scored"])
        if replayed != theirs["scored"]:
            differences[name] = (replayed, {"version": versions[path], **theirs["scored"]})
    print(f"{folder.name}: {compared}")

    expected = {name for name in KNOWN if (folder / f"{name}.json").is_file()}
    unexplained = sorted(set(differences) - expected)
    resolved = sorted(expected - set(differences))
    listed = "\n".join(f"  {name}: litmus-replay {differences[name][0]}, AgentDojo {differences[name][1]}"
                       for name in unexplained[:20])
    assert not unexplained, (f"{len(unexplained)} of {len(files)} runs replay checks other than AgentDojo's own "
                             f"re-grading (first 20):\n{listed}")
    assert not resolved, f"known differences that no longer differ (remove them from KNOWN): {resolved[:20]}"
    assert compared["runs"] + compared["no_tool_calls"] + compared["error"] == len(files), compared
    assert compared["checks"] > compared["runs"]  # utility for every run, security for the attacked ones
