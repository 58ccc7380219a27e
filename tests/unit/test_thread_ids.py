"""The per-call id switch of an isolated world's server changes the calling thread alone, and back."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="switching effective ids needs root")

PROBE = textwrap.dedent("""
    import os, tempfile, threading
    from litmus_replay.envs.thread_ids import become, become_root

    seen = {}
    go, done = threading.Event(), threading.Event()

    def other():
        go.wait()
        seen["other"] = (os.geteuid(), os.getegid())
        done.set()

    private = tempfile.mkdtemp()  # mode 0700, root's
    threading.Thread(target=other).start()
    become(4321, 4322)
    seen["caller"] = (os.geteuid(), os.getegid())
    try:
        open(os.path.join(private, "probe"), "w")
    except PermissionError:
        seen["caller_refused"] = True
    go.set(); done.wait()
    become_root()
    seen["after"] = (os.geteuid(), os.getegid())
    os.rmdir(private)
    print(seen)
""")


def test_become_switches_the_calling_thread_only_and_back():
    shown = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout
    seen = ast.literal_eval(shown)
    assert seen["caller"] == (4321, 4322)
    assert seen["caller_refused"] is True  # the kernel decides the caller's access with the switched ids
    assert seen["other"] == (0, 0)  # the watcher thread keeps root
    assert seen["after"] == (0, 0)
