"""The wheel is the tool: built from a copy of the checkout (in a directory whose name has a space) and
installed into a fresh virtual environment, its dependencies from the package index, it prints the README's
re-validation table exactly as the checkout's install does, runs every command's ``--help``, answers
``python -m litmus_replay`` and ``litmus_replay.__version__``, and holds every package folder and data file
of the tree."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import click
import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "litmus_replay"
FOLDERS = ("replay", "envs", "adapters")
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
# Not the build's: the interpreter here may be told not to write bytecode, and the build says it skips it.
BUILD_NOISE = re.compile(r"byte-compiling is disabled")


@dataclass(frozen=True)
class Built:
    source: Path  # the copy the wheel was built from
    wheel: Path
    log: str


@dataclass(frozen=True)
class Venv:
    root: Path
    work: Path  # a directory outside the checkout, to run commands from

    def bin(self, name: str) -> str:
        return str(self.root / "bin" / name)


def _env() -> dict[str, str]:
    """This environment without what would point an interpreter at the checkout's install or pick a runtime."""
    dropped = {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LITMUS_RUNTIME"}
    return {key: value for key, value in os.environ.items() if key not in dropped}


def _checkout_files() -> list[str]:
    """The checkout's files as git sees them, tracked or new but not ignored (so no build/, egg-info or bytecode)."""
    try:
        listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                                capture_output=True, check=True, timeout=60).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"the wheel is built from a git checkout's files: {exc}")
    return sorted({name for name in os.fsdecode(listed).split("\0") if name and (ROOT / name).is_file()})


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Built:
    """sdist, then the wheel from the sdist (``python -m build``), without build isolation or the network."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "x y" / "main"
    for name in _checkout_files():
        (source / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, source / name, follow_symlinks=False)
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(tmp / "dist"), str(source)],
                          capture_output=True, text=True, timeout=600, env=_env())
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [wheel] = (tmp / "dist").glob("*.whl")
    return Built(source, wheel, done.stdout + done.stderr)


@pytest.fixture(scope="module")
def venv(built, tmp_path_factory) -> Venv:
    """A fresh virtual environment (no system site packages) with the wheel installed."""
    tmp = tmp_path_factory.mktemp("venv")
    root = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, timeout=300, env=_env())
    done = subprocess.run([str(root / "bin" / "python"), "-m", "pip", "install", "--quiet",
                           "--disable-pip-version-check", str(built.wheel)],
                          capture_output=True, text=True, timeout=1800, env=_env(), cwd=tmp)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    work = tmp / "work"
    work.mkdir()
    return Venv(root, work)


def _run(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=_env())


def test_the_build_warns_about_nothing(built):
    """No deprecated license table, no data folder that is not a package."""
    warnings = [line for line in built.log.splitlines()
                if re.search(r"(?i)warn|deprecat", line) and not BUILD_NOISE.search(line)]
    assert warnings == []


def test_the_wheel_holds_every_package_folder_and_data_file(built):
    names = set(zipfile.ZipFile(built.wheel).namelist())
    tree = sorted(path.relative_to(built.source) for folder in FOLDERS for path in (built.source / folder).rglob("*")
                  if path.is_file() and "__pycache__" not in path.parts)
    assert tree, "the copy holds no package folder"
    folders = {path.parent for path in tree if path.suffix == ".py"}
    assert sorted(str(folder) for folder in folders if not any(n.startswith(f"{PACKAGE}/{folder.as_posix()}/")
                                                                for n in names)) == []
    assert sorted(str(path) for path in tree if f"{PACKAGE}/{path.as_posix()}" not in names) == []  # data too
    for data in ("replay/schemas/report-v1.schema.json", "envs/runtimes/docker/Dockerfile",
                 "envs/runtimes/docker/seccomp.json"):
        assert f"{PACKAGE}/{data}" in names
    # the package's own modules at its top, nothing else of the checkout (not setup.py, not tests/)
    assert {n for n in names if n.count("/") == 1 and n.startswith(f"{PACKAGE}/")} == {
        f"{PACKAGE}/__init__.py", f"{PACKAGE}/__main__.py"}
    assert {n.split("/")[0] for n in names} == {PACKAGE, f"{PACKAGE}-{VERSION}.dist-info"}
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_the_installed_package_has_its_version_and_runs_as_a_module(venv):
    done = _run([venv.bin("python"), "-c", "import litmus_replay; print(litmus_replay.__version__); "
                                           "print(litmus_replay.__file__)"], venv.work)
    assert done.returncode == 0, done.stderr
    version, where = done.stdout.splitlines()
    assert version == VERSION
    assert Path(where).is_relative_to(venv.root)  # the wheel's copy, not the checkout
    done = _run([venv.bin("python"), "-m", PACKAGE, "--help"], venv.work)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"Usage: python -m {PACKAGE} [OPTIONS] COMMAND")


def _command_paths(command: click.Command, path: tuple[str, ...] = (),
                   parent: click.Context | None = None) -> list[tuple[str, ...]]:
    """Every command and subcommand of the command line, as the words that name it."""
    paths = [path]
    if isinstance(command, click.Group):
        ctx = click.Context(command, info_name=path[-1] if path else "litmus-replay", parent=parent)
        for name in command.list_commands(ctx):
            paths += _command_paths(command.get_command(ctx, name), (*path, name), ctx)
    return paths


def test_every_command_has_its_help(venv):
    from litmus_replay.replay.cli import main

    paths = _command_paths(main)
    assert ("revalidate",) in paths and len(paths) > 5

    def helps(path: tuple[str, ...]) -> tuple[tuple[str, ...], subprocess.CompletedProcess]:
        return path, _run([venv.bin("litmus-replay"), *path, "--help"], venv.work)

    with ThreadPoolExecutor(max_workers=4) as pool:
        done = list(pool.map(helps, paths))
    failed = {" ".join(path) or "(the group)": (proc.returncode, proc.stderr[-500:]) for path, proc in done
              if proc.returncode != 0 or not proc.stdout.startswith(" ".join(("Usage: litmus-replay", *path)))}
    assert failed == {}


def _table(stdout: str) -> list[str]:
    """What ``revalidate`` prints on stdout, but a progress bar's line (its rate and time vary)."""
    return [line.rstrip() for line in stdout.splitlines() if not line.startswith("revalidating")]


def test_the_readme_main_job_prints_what_the_checkout_prints(venv, tmp_path, runtime_opener):
    runtime_opener("sandbox").close()  # the default runtime: skips, with the reason, where it cannot run
    job = ["revalidate", str(ROOT / "corpus" / "runs"), "--worlds", str(ROOT / "corpus" / "worlds"), "--out"]
    checkout = _run([sys.executable, "-m", PACKAGE, *job, str(tmp_path / "checkout")], tmp_path, timeout=900)
    assert checkout.returncode == 0, checkout.stdout[-2000:] + checkout.stderr[-2000:]
    wheel = _run([venv.bin("litmus-replay"), *job, str(tmp_path / "wheel")], venv.work, timeout=900)
    assert wheel.returncode == 0, wheel.stdout[-2000:] + wheel.stderr[-2000:]
    assert "over-penalised (original misuse, environment refused): 37" in wheel.stdout
    assert _table(wheel.stdout) == _table(checkout.stdout)
    summary = {name: json.loads((tmp_path / name / "summary.json").read_text()) for name in ("checkout", "wheel")}
    assert summary["wheel"] == summary["checkout"]
