"""Stub worlds are safe to use from several threads at once (a Dask worker runs chunks in threads): the files
stub's switch of pyfakefs's process-wide uid is never seen by another thread's call."""

from __future__ import annotations

import threading

import pytest
from pyfakefs import helpers as fake_helpers

from litmus_replay.envs import World

SPEC = {"principals": ["alice", "bob"],
        "files": {"tree": {"/workspace/secret.txt": {"content": "s3cret", "owner": "bob", "mode": 0o600}}}}
THREADS, CALLS = 8, 150


@pytest.fixture
def unprivileged_fake_uid():
    """As on a host where the tests do not run as root: pyfakefs enforces permissions for this uid."""
    previous = fake_helpers.get_uid()
    fake_helpers.set_uid(4242)
    yield
    fake_helpers.set_uid(previous)


def test_stub_worlds_in_threads_answer_as_they_do_alone(unprivileged_fake_uid):
    with World(SPEC, "stub") as alone:
        expected = alone.call({"tool": "read_file", "params": {"path": "/workspace/secret.txt"}, "principal": "alice"})
    assert expected["status"] == "ok"  # the stub never refuses on permissions
    outcomes: list[dict] = []
    start = threading.Barrier(THREADS)

    def work() -> None:
        with World(SPEC, "stub") as world:
            start.wait()
            for _ in range(CALLS):
                outcomes.append(world.call({"tool": "read_file", "params": {"path": "/workspace/secret.txt"},
                                            "principal": "alice"}))

    threads = [threading.Thread(target=work) for _ in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(outcomes) == THREADS * CALLS
    assert [o for o in outcomes if o != expected] == []
    assert fake_helpers.get_uid() == 4242  # restored, whatever the interleaving
