"""A clean ``revalidate`` leaves nothing behind, in every isolated runtime and with a pool of workers:
no container carrying the runtime's labels, no temporary directory of the sandbox, the env server or a
world (``litmus-sandbox-*``, ``litmus-env-*``, ``litmus-world-*``, the docker socket directories).

The batch runs as a subprocess with its own temporary directory, so what it made is told apart from
what anything else on the machine makes meanwhile: its containers are the labelled ones whose socket
directory lies there, and the directories it leaves are the ones there.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from litmus_replay.replay.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
# A shell world (its container is never reused) and a files world (its container is kept warm).
SCENARIOS = [ROOT / "scenarios" / "hostile" / "evidence-forged.yaml", ROOT / "scenarios" / "core" / "benign-run.yaml"]
PATTERNS = ("litmus-sandbox-*", "litmus-env-*", "litmus-world-*", "litmus-docker-*")
COPIES = 3


def _batch(root: Path) -> tuple[Path, Path]:
    worlds, runs = root / "worlds", root / "runs"
    worlds.mkdir()
    runs.mkdir()
    lines = []
    for path in SCENARIOS:
        scenario = load_scenario(path)
        spec = {"name": scenario.name, "world": scenario.spec.world, "policy": scenario.spec.policy.model_dump()}
        (worlds / f"{scenario.name}.yaml").write_text(yaml.safe_dump(spec))
        [trajectory] = scenario.trajectories
        lines += [trajectory.model_copy(update={"task": scenario.name, "id": f"{scenario.name}-{n}"}).model_dump_json()
                  for n in range(COPIES)]
    (runs / "runs.jsonl").write_text("\n".join(lines) + "\n")
    return worlds, runs


def _ours(tmp: Path) -> list[str]:
    """Labelled containers whose socket directory is in the batch's own temporary directory."""
    from litmus_replay.envs.runtimes.docker import LABEL, Engine
    from litmus_replay.envs.runtimes.docker.engine import SOCKDIR

    engine = Engine.connect(timeout=10)
    try:
        return sorted(c.name for c in engine.labelled(**{LABEL: ""})
                      if str(c.labels.get(SOCKDIR, "")).startswith(f"{tmp}/"))
    finally:
        engine.close()


def _left(tmp: Path) -> list[str]:
    return sorted(path.name for pattern in PATTERNS for path in tmp.glob(pattern))


def test_a_clean_revalidate_leaves_no_container_and_no_directory(isolated_runtime, tmp_path):
    name = isolated_runtime.name
    worlds, runs = _batch(tmp_path)
    # Beside the system's own temporary directories: the sandbox's namespaces must reach it as they do /tmp.
    tmp = Path(tempfile.mkdtemp(prefix="clean-exit-"))
    os.chmod(tmp, 0o755)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "litmus_replay.replay", "revalidate", str(runs), "--worlds", str(worlds),
             "--out", str(tmp_path / "out"), "--runtime", name, "--jobs", "2", "--no-reports"],
            env={**os.environ, "TMPDIR": str(tmp)}, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stdout + done.stderr
        lines = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
        assert [line["status"] for line in lines] == ["ok"] * COPIES * len(SCENARIOS), lines
        if name == "docker":
            assert _ours(tmp) == [], "the batch left containers running"
        assert _left(tmp) == [], f"the batch left temporary directories: {_left(tmp)}"
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
