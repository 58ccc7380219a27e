"""These tests replay in this process: the CLI's default real runtime (the sandbox) is tested under
tests/integration, where runtimes are."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _inprocess_by_default(monkeypatch):
    monkeypatch.setenv("LITMUS_RUNTIME", "inprocess")
