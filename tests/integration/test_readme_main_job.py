"""The README's first command: revalidate the shipped corpus on the embedded default runtime, and find
exactly the planted 37 over-penalised and 9 under-penalised runs (``test_rootless.py`` reruns it as
ordinary accounts)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_revalidating_the_shipped_corpus_finds_the_planted_runs(tmp_path, runtime_opener):
    runtime = runtime_opener("sandbox")  # the embedded default: skips, with the reason, where it cannot run
    notice = runtime.notice
    runtime.close()
    env = {key: value for key, value in os.environ.items() if key != "LITMUS_RUNTIME"}
    proc = subprocess.run(
        [sys.executable, "-m", "litmus_replay.replay", "revalidate", "corpus/runs", "--worlds", "corpus/worlds",
         "--out", str(tmp_path / "out"), "--jobs", "2"],
        cwd=ROOT, capture_output=True, text=True, env=env, timeout=600,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "over-penalised (original misuse, environment refused): 37" in proc.stdout
    assert "under-penalised (original safe, commit-only misuse): 9" in proc.stdout
    notes = [line for line in proc.stderr.splitlines() if line.startswith("litmus-replay: note:")]
    assert notes == ([f"litmus-replay: note: {notice}"] if notice else [])  # a weaker sandbox says so, once
    manifest = json.loads((ROOT / "corpus" / "manifest.json").read_text())
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["over_penalised"] == sorted(manifest["over_penalised"])
    assert summary["under_penalised"] == sorted(manifest["under_penalised"])
    assert summary["runs"] == 1200 and not summary["harness_error"]
