"""The distribution's packages, found rather than listed.

The folders replay/, envs/ and adapters/ install as one package, ``litmus_replay`` (``package-dir`` in
pyproject.toml maps it onto this directory, whose ``__init__.py`` it is). Setuptools' discovery, configured
in pyproject.toml alone, would name them ``replay``, ``envs`` and ``adapters``; this adds the prefix. Every
other setting is in pyproject.toml.
"""

from __future__ import annotations

import os
from pathlib import Path

from setuptools import find_namespace_packages, setup

PACKAGE = "litmus_replay"
FOLDERS = ("replay", "envs", "adapters")
ROOT = Path(__file__).resolve().parent


def packages(root: Path = ROOT) -> list[str]:
    """``litmus_replay`` and every folder under the three that holds a file (a module or package data; data-only
    folders such as replay/schemas are namespace packages), prefixed; a folder left with nothing but
    ``__pycache__`` is not a package."""
    found = find_namespace_packages(
        where=str(root),
        include=[pattern for folder in FOLDERS for pattern in (folder, f"{folder}.*")],
        exclude=["*__pycache__*"],
    )
    held = [name for name in found
            if all(part.isidentifier() for part in name.split("."))
            and any(entry.is_file() for entry in root.joinpath(*name.split(".")).iterdir())]
    return [PACKAGE, *sorted(f"{PACKAGE}.{name}" for name in held)]


if __name__ == "__main__":
    # Named, so that the build leaves this file out of the package it shares a directory with (a build
    # frontend's own script would be named instead).
    setup(packages=packages(), script_name=os.path.relpath(__file__))
