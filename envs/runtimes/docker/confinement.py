"""What confines a container beyond its capabilities: the seccomp profile this package ships, and a
word when the engine's host confines it less than a container made for a shell needs.

A container made for a world with a shell lets its env server hold ``SYS_ADMIN`` (a mount namespace and a
chroot per command). Docker's default seccomp profile then lets every process in it, commands included,
make a user namespace of its own (``unshare -Ur``: every capability over that namespace, tmpfs mounts,
unmounting the world's bind in its own view) — kernel surface the sandbox refuses. Such a container gets
``seccomp.json`` instead, which refuses that (and a few other things no world needs) and allows the rest.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib import resources
from typing import Any, Iterable

SECCOMP_FILE = "seccomp.json"


@lru_cache(maxsize=1)
def seccomp_profile() -> str:
    """The shipped profile as the engine takes it (``security_opt`` ``seccomp=<json>``), compact."""
    text = resources.files(__package__).joinpath(SECCOMP_FILE).read_text(encoding="utf-8")
    return json.dumps(json.loads(text), separators=(",", ":"))


def host_notice(info: dict[str, Any]) -> str | None:
    """One line when the engine's host (``docker info``) has neither AppArmor nor SELinux and runs cgroup
    v1: there a compromised env server holding ``SYS_ADMIN`` could reach the host; else None."""
    options: Iterable[str] = info.get("SecurityOptions") or ()
    names = {field.split("=", 1)[1] for option in options for field in str(option).split(",")
             if field.startswith("name=")}
    if names & {"apparmor", "selinux"} or str(info.get("CgroupVersion") or "") != "1":
        return None
    return ("docker: this engine's host has neither AppArmor nor SELinux and runs cgroup v1; a container made "
            "for a world with a shell lets its env server hold SYS_ADMIN, which a compromised server could use "
            "to reach the host there: prefer --runtime sandbox where that matters")


__all__ = ["SECCOMP_FILE", "host_notice", "seccomp_profile"]
