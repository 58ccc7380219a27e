"""The distribution's configuration as the build reads it (pyproject.toml and setup.py): its packages are every
folder of the tree, found rather than listed, every data file of the tree ships, and ``import litmus_replay``
is cheap. tests/integration/test_wheel.py builds the wheel and uses it."""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "litmus_replay"
FOLDERS = ("replay", "envs", "adapters")

# Run in a child interpreter: setuptools patches distutils and the warning filters of the process it runs in.
CONFIGURED = """
import json, setuptools
from distutils.core import run_setup
dist = run_setup("setup.py", script_args=[], stop_after="config")
print(json.dumps({"packages": dist.packages, "package_data": dist.package_data, "package_dir": dist.package_dir,
                  "license": dist.metadata.license_expression}))
"""


def tree_files(root: Path = ROOT) -> list[Path]:
    """The files of the three folders, as paths relative to ``root`` (no bytecode, nothing hidden)."""
    return sorted(path.relative_to(root) for folder in FOLDERS for path in (root / folder).rglob("*")
                  if path.is_file() and "__pycache__" not in path.parts
                  and not any(part.startswith(".") for part in path.relative_to(root).parts))


def package_of(path: Path) -> str:
    return ".".join((PACKAGE, *path.parent.parts))


@pytest.fixture(scope="module")
def configured() -> dict:
    done = subprocess.run([sys.executable, "-c", CONFIGURED], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if k != "PYTHONWARNINGS"})
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr.lower(), done.stderr  # e.g. a deprecated form of the license
    return json.loads(done.stdout)


def test_the_packages_are_every_folder_of_the_tree(configured):
    """A folder holding a module or a data file is a package of the distribution (a data-only folder, like
    replay/schemas, a namespace package): none is named by hand, so none can be left out of the wheel."""
    assert configured["package_dir"] == {PACKAGE: "."}
    assert set(configured["packages"]) == {PACKAGE} | {package_of(path) for path in tree_files()}
    assert len(configured["packages"]) == len(set(configured["packages"]))


def test_every_data_file_of_the_tree_ships(configured):
    """A file of the tree that is not a module is package data of its folder's package (the schemas, the
    Dockerfile and seccomp profile of the docker runtime): a new one is declared in pyproject.toml."""
    data = configured["package_data"]
    missing = [str(path) for path in tree_files() if path.suffix != ".py"
               and not any(fnmatch.fnmatch(path.name, pattern) for pattern in data.get(package_of(path), ()))]
    assert missing == []
    for package, patterns in data.items():  # and no declaration outlives its files
        folder = ROOT.joinpath(*package.split(".")[1:])
        assert all(list(folder.glob(pattern)) for pattern in patterns), (package, patterns)


def test_the_license_is_an_spdx_expression(configured):
    assert configured["license"] == "MIT"


def test_importing_the_package_imports_nothing_else(tmp_path):
    """``import litmus_replay`` loads neither its subpackages nor the installed metadata; ``__version__``
    reads the metadata when asked."""
    code = ("import sys; before = set(sys.modules); import litmus_replay; "
            "print(sorted(set(sys.modules) - before)); print(litmus_replay.__version__)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=tmp_path).stdout.splitlines()
    assert out[0] == "['litmus_replay']"
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert out[1] == version


def test_an_unknown_name_of_the_package_is_an_attribute_error():
    import litmus_replay

    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        litmus_replay.nothing_here  # noqa: B018
    assert "__version__" in dir(litmus_replay)


def test_python_m_litmus_replay_is_the_command_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", PACKAGE, "--help"], capture_output=True, text=True, timeout=120,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Usage: python -m {PACKAGE} [OPTIONS] COMMAND")
    assert "revalidate" in done.stdout
