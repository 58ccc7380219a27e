"""What each hostile input costs before it is refused: wall time and peak memory of one ``litmus-replay``
process per input, each in a fresh child so the figures do not mix.

Inputs: a YAML alias bomb (9^9 strings once expanded), a 200 MB run file (sparse: it costs no disk), a CEL
condition of 15,000 concatenations (it overflows the evaluator's native stack if compiled), and a
trajectory of 10,001 calls. Each must end with one error line and exit status 2.

Goal: every input refused in under 5 s and 200 MB of peak memory.

Run: python benchmarks/hostile_inputs.py
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

WORLD = {"principals": ["alice"], "files": {"tree": {"/workspace/README.md": "notes\n"}}}
BOMB = "format_version: 1\nname: bomb\na: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{b}: &{b} [{', '.join([f'*{a}'] * 9)}]\n" for a, b in zip("abcdefgh", "bcdefghi")
)


def _inputs(root: Path) -> dict[str, list[str]]:
    (root / "bomb.yaml").write_text(BOMB)
    runs = root / "runs"
    runs.mkdir()
    with open(runs / "huge.jsonl", "wb") as handle:
        handle.truncate(200 * 1024 * 1024)
    worlds = root / "worlds"
    worlds.mkdir()
    (worlds / "w.yaml").write_text(yaml.safe_dump({"name": "w", "world": WORLD}))
    cel = {"name": "cel", "world": WORLD,
           "policy": {"rules": [{"id": "long", "when": " + ".join(["'a'"] * 15000) + " == ''"}]},
           "trajectory": {"id": "t", "principal": "alice", "turns": []}}
    (root / "cel.yaml").write_text(yaml.safe_dump(cel))
    calls = [{"tool": "read_file", "arguments": {"path": "/workspace/README.md"}}] * 10_001
    (root / "long.jsonl").write_text(json.dumps({"id": "t", "principal": "alice", "turns": [{"calls": calls}]}) + "\n")
    (root / "long.yaml").write_text(yaml.safe_dump({"name": "long", "world": WORLD, "trajectory": {"path": "long.jsonl"}}))
    check = ["check", "--runtime", "inprocess"]
    return {
        "YAML alias bomb": [*check, str(root / "bomb.yaml")],
        "200 MB run file": ["revalidate", str(runs), "--worlds", str(worlds), "--out", str(root / "out"),
                            "--runtime", "inprocess", "--jobs", "1", "--no-reports"],
        "15,000 CEL concatenations": [*check, str(root / "cel.yaml")],
        "10,001 calls": [*check, str(root / "long.yaml")],
    }


def _measure(args: list[str]) -> tuple[float, float, int, str]:
    """Seconds, peak MB of the child (its own rusage, from wait4), its exit status and its error line."""
    with tempfile.TemporaryFile("w+") as err:
        start = time.perf_counter()
        child = subprocess.Popen([sys.executable, "-m", "litmus_replay.replay", *args], stdout=subprocess.DEVNULL,
                                 stderr=err, text=True)
        _, status, usage = os.wait4(child.pid, 0)
        elapsed = time.perf_counter() - start
        child.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        error = next((line for line in err.read().splitlines() if "error:" in line), "(no error line)")
    return elapsed, usage.ru_maxrss / 1024, child.returncode, error


def main() -> None:
    print(f"# hostile_inputs.py\n# python {platform.python_version()} on {platform.machine()}; one child process each")
    print(f"{'input':<28} {'time':>7} {'peak':>8} exit  error line")
    with tempfile.TemporaryDirectory() as tmp:
        for name, args in _inputs(Path(tmp)).items():
            elapsed, peak, status, error = _measure(args)
            error = error.replace("litmus-replay: error: ", "").replace(tmp + "/", "")
            print(f"{name:<28} {elapsed:6.2f}s {peak:6.0f}MB {status:>4}  {error[:72]}…")


if __name__ == "__main__":
    main()
