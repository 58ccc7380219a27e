"""Errors name world paths, never the host paths behind them: a name too long for the kernel, a directory
the principal may not enter, a path through a regular file, in every runtime."""

from __future__ import annotations

import json
import tempfile

import pytest

from litmus_replay.envs.world import scratch_dir

SPEC = {
    "principals": ["alice", "bob"],
    "files": {"tree": {
        "/workspace/README.md": "notes\n",
        "/home/alice/": {"dir": True, "owner": "alice", "mode": "0700"},
        "/home/alice/secret": {"content": "s", "owner": "alice", "mode": "0600"},
    }},
}
CALLS = [
    ("write_file", {"path": "/workspace/" + "a" * 300, "content": "x"}),
    ("read_file", {"path": "/home/alice/secret"}),
    ("write_file", {"path": "/workspace/README.md/x", "content": "x"}),
    ("read_file", {"path": "/workspace/" + "b" * 300 + "/c"}),
]


@pytest.mark.parametrize(("tool", "params"), CALLS, ids=["long-name", "no-entry", "through-a-file", "long-dir"])
def test_an_error_names_the_world_path_only(any_runtime, tool, params):
    world = any_runtime.open_world(SPEC, "real")
    try:
        outcome = world.call({"tool": tool, "params": params, "principal": "bob"})
    finally:
        world.close()
    # in-process roots are temporary directories on the host; isolated ones sit at /world/root inside
    for prefix in (tempfile.gettempdir() + "/", (scratch_dir() or tempfile.gettempdir()) + "/", "/world/root",
                   "/run/litmus"):
        assert prefix not in json.dumps(outcome), f"{prefix} leaked: {outcome.get('error')}"
