"""The documentation site builds with ``mkdocs build --strict``: every page in the navigation, no broken link
or anchor, the command reference generated from the command line and the API reference from the
docstrings. The site is built into a temporary directory, never into the checkout."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click

from litmus_replay.replay.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_the_site_builds_strictly_with_every_command_and_the_api(tmp_path):
    site = tmp_path / "site"
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    pages = {str(path.relative_to(site)) for path in site.rglob("index.html")}
    for page in ("index.html", "quickstart/index.html", "guides/revalidating/index.html", "architecture/index.html",
                 "reference/cli/index.html", "reference/python-api/index.html"):
        assert page in pages, page
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    documented = set(re.findall(r'id="litmus-replay-([a-z-]+)"', cli))
    assert set(main.list_commands(click.Context(main))) <= documented, "a command is missing from the reference"
    api = (site / "reference" / "python-api" / "index.html").read_text(encoding="utf-8")
    assert 'id="litmus_replay.replay.batch.run_batch"' in api
    assert 'id="litmus_replay.replay.model.Trajectory"' in api
