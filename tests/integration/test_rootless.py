"""The embedded default as an ordinary user: the sandbox tests, the hostile pack and the README's main job,
rerun as unprivileged accounts made for this session — one with a subordinate id range (the full mode,
ids mapped through newuidmap/newgidmap) and one without (every principal on the account's one uid).

The accounts are made with ``useradd`` and removed afterwards; they get search permission (an ACL entry,
also removed) on every directory above the checkout and the Python installation that others cannot
search. Each rerun gets a private ``/tmp`` (a mount namespace of its own), so the hostile pack's host
sentinel directory there is its own even while another test run uses the host's. The rerun sets
``LITMUS_EXPECT_ID_MAPPING``, so a sandbox that cannot run as the account, or runs in another mode, fails
instead of skipping. Needs root (CI runs as root), ``useradd``, ``runuser``, ``setfacl``, ``unshare`` and,
for the full mode, ``newuidmap``; skips with the reason otherwise.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RERUN = ["tests/integration/test_sandbox_runtime.py", "tests/integration/test_hostile.py",
         "tests/integration/test_readme_main_job.py"]
TOOLS = ("useradd", "userdel", "usermod", "runuser", "setfacl", "unshare")
# Far above the ranges useradd hands out (from 100000, 65536 per account) and the root sandbox's own.
SUBORDINATE_BASE = 1_000_000_000


def _run(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True, text=True)


def _tops() -> set[Path]:
    """This interpreter's installation and this checkout: what the account's rerun needs to reach."""
    return {Path(os.path.realpath(top)) for top in
            (Path(sys.executable).parent, Path(sys.prefix), Path(sys.base_prefix), ROOT)}


def _needed_dirs() -> list[Path]:
    """Every directory the account must search to run this interpreter and import this checkout."""
    dirs: set[Path] = set()
    for top in _tops():
        dirs.update(top.parents)
    return sorted(dirs)


def _under_tmp() -> list[str]:
    """The tops that lie under /tmp, which the rerun's private /tmp would hide (a checkout cloned there)."""
    return sorted(str(top) for top in _tops() if Path("/tmp") in top.parents)


# In a mount namespace of its own: the host's /tmp kept aside, the account's directory bound over /tmp
# (carrying that aside with it), every top under the host's /tmp bound back at its own path, then the
# command. Arguments: the account's directory, the count of tops, the tops, the command.
_PRIVATE_TMP = """set -e
account=$0; count=$1; shift
mkdir -p "$account/.host-tmp"
mount --bind /tmp "$account/.host-tmp"
mount --rbind "$account" /tmp
while [ "$count" -gt 0 ]; do
  top=$1; shift; count=$((count - 1))
  mkdir -p "$top"
  mount --bind "/tmp/.host-tmp${top#/tmp}" "$top"
done
cd /tmp/home && exec "$@"
"""


class Account:
    """An unprivileged account for this session, and the commands it runs."""

    def __init__(self, name: str, subordinate: int | None):
        self.name = name
        self.subordinate = subordinate
        self.tmp = Path(tempfile.mkdtemp(prefix=f"litmus-{name}-"))  # the rerun's /tmp
        self.home = "/tmp/home"  # inside the rerun's /tmp

    def create(self) -> None:
        _run("useradd", "--system", "--no-create-home", "--user-group", "--shell", "/bin/sh",
             "--home-dir", self.home, self.name)
        if self.subordinate is not None:
            end = self.subordinate + 65535
            _run("usermod", "--add-subuids", f"{self.subordinate}-{end}", "--add-subgids", f"{self.subordinate}-{end}",
                 self.name)
        os.chmod(self.tmp, 0o1777)
        (self.tmp / "home").mkdir(mode=0o700)
        shutil.chown(self.tmp / "home", self.name, self.name)

    def remove(self) -> None:
        if self.subordinate is not None:
            end = self.subordinate + 65535
            subprocess.run(["usermod", "--del-subuids", f"{self.subordinate}-{end}", "--del-subgids",
                            f"{self.subordinate}-{end}", self.name], capture_output=True)
        subprocess.run(["userdel", self.name], capture_output=True)
        shutil.rmtree(self.tmp, ignore_errors=True)

    def pytest(self, expect: str, *args: str) -> subprocess.CompletedProcess[str]:
        """Run pytest as the account, in a mount namespace whose /tmp is the account's own directory (with
        the checkout and the interpreter where they were, even under the host's /tmp)."""
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.home, "TMPDIR": "/tmp",
               "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "LITMUS_EXPECT_ID_MAPPING": expect}
        as_account = ["runuser", "-u", self.name, "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()),
                      sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-rs", "--rootdir", str(ROOT),
                      *args]
        keep = _under_tmp()
        argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", _PRIVATE_TMP, str(self.tmp),
                str(len(keep)), *keep, *as_account]
        return subprocess.run(argv, capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="session")
def accounts():
    if os.geteuid() != 0:
        pytest.skip("making unprivileged accounts needs root (CI runs as root)")
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed (apt-get install passwd util-linux acl)")
    tag = os.getpid() % 10000
    made = {"subordinate": Account(f"litmus-sub{tag}", SUBORDINATE_BASE + tag * 65536),
            "single-uid": Account(f"litmus-one{tag}", None)}
    granted: list[tuple[Path, str]] = []
    try:
        for account in made.values():
            account.create()
            for directory in _needed_dirs():
                if not os.stat(directory).st_mode & stat.S_IXOTH:
                    _run("setfacl", "-m", f"u:{account.name}:x", str(directory))
                    granted.append((directory, account.name))
        yield made
    finally:
        for directory, name in granted:
            subprocess.run(["setfacl", "-x", f"u:{name}", str(directory)], capture_output=True)
        for account in made.values():
            account.remove()


@pytest.mark.parametrize("mode", ["subordinate", "single-uid"])
def test_the_sandbox_the_hostile_pack_and_the_main_job_hold_as_an_ordinary_user(accounts, mode):
    if mode == "subordinate" and not (shutil.which("newuidmap") and shutil.which("newgidmap")):
        pytest.skip("newuidmap/newgidmap not installed (apt-get install uidmap)")
    account = accounts[mode]
    proc = account.pytest(mode, "-k", "not docker", *(str(ROOT / path) for path in RERUN))
    tail = (proc.stdout + proc.stderr)[-4000:]
    assert proc.returncode == 0, tail
    assert " passed" in proc.stdout and " failed" not in proc.stdout, tail
    assert "SKIPPED" not in proc.stdout, tail  # every rerun test ran as the account
