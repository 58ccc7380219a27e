"""The seccomp profile the docker runtime gives a container made for a shell ships with the package and
refuses a new user namespace (and entering another), and the note on a thinly confined host."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest

from litmus_replay.envs.runtimes.docker import confinement

ROOT = Path(__file__).resolve().parents[2]
CLONE_NEWUSER = 0x10000000


def _rules(name: str) -> list[dict]:
    profile = json.loads(confinement.seccomp_profile())
    return [rule for rule in profile["syscalls"] if name in rule["names"]]


def test_the_profile_is_package_data_and_is_found():
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert confinement.SECCOMP_FILE in data["litmus_replay.envs.runtimes.docker"]
    assert json.loads(confinement.seccomp_profile())["defaultAction"] == "SCMP_ACT_ALLOW"


@pytest.mark.parametrize("call", ["unshare", "clone"])
def test_a_new_user_namespace_is_refused_and_other_namespaces_are_not(call):
    [rule] = _rules(call)
    [arg] = rule["args"]
    assert rule["action"] == "SCMP_ACT_ERRNO" and arg["index"] == 0 and arg["op"] == "SCMP_CMP_MASKED_EQ"
    assert arg["value"] == arg["valueTwo"] == CLONE_NEWUSER  # a mount namespace (a command's root) passes


def test_clone3_and_setns_are_refused():
    [clone3] = _rules("clone3")
    assert clone3["action"] == "SCMP_ACT_ERRNO" and clone3["errnoRet"] == 38 and not clone3.get("args")  # ENOSYS
    [setns] = _rules("setns")
    assert setns["action"] == "SCMP_ACT_ERRNO" and not setns.get("args")


@pytest.mark.parametrize("options, cgroup, noted", [
    (["name=seccomp,profile=default"], "1", True),
    (["name=seccomp,profile=default"], "2", False),
    (["name=apparmor", "name=seccomp,profile=default"], "1", False),
    (["name=selinux"], "1", False),
    ([], None, False),
])
def test_a_host_without_apparmor_or_selinux_on_cgroup_v1_gets_one_line(options, cgroup, noted):
    notice = confinement.host_notice({"SecurityOptions": options, "CgroupVersion": cgroup})
    assert (notice is not None) == noted
    if noted:
        assert "\n" not in notice and "--runtime sandbox" in notice
