"""The ids a world's principals act with where each call runs under its principal's uid, and back.

In the sandbox and in a container the env server is uid 0 of its namespace (holding the capabilities it
needs to lay a world out and to switch uids), and in a container uid 0 is also the host's uid 0 on any
host directory bound in. A principal acting with uid 0 would hold those capabilities: it could trace or
signal the server and forge what it answers, or leave a setuid-root file where the host can reach it.
So, where calls switch uid, the id 0 a world declares (as a principal's uid or gid, or as the owner
``root`` of an entry) acts as :data:`ROOT_STAND_IN`, an id with no capability anywhere and no relation to
the server, and every other declared id acts as itself. The world still sees 0: owners in views,
effects and snapshots map back (:func:`declared_id`), and the world's root keeps root's powers over the
world's own files where the domains' code acts for it; its commands run as the stand-in. A world that
declares the stand-in itself cannot be told apart from its root, so it is refused
(:func:`check_isolable`).
"""

from __future__ import annotations

from typing import Any, Mapping

from .errors import WorldSpecError

ROOT_STAND_IN = 65533  # below nobody (65534); inside every id range the isolated runtimes map


def kernel_id(declared: int) -> int:
    """The uid or gid the kernel sees for an id a world declares."""
    return ROOT_STAND_IN if declared == 0 else declared


def declared_id(kernel: int) -> int:
    """The id a world declared for one the kernel reports (the server's own 0 reads as the world's root)."""
    return 0 if kernel in (0, ROOT_STAND_IN) else kernel


def check_isolable(principals: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse, in one line naming the field, a principal whose ids the runtime cannot keep apart from
    the world's root."""
    for name, attrs in principals.items():
        for key in ("uid", "gid"):
            if attrs.get(key) == ROOT_STAND_IN:
                raise WorldSpecError(
                    f"world.principals.{name}.{key}",
                    f"{key} {ROOT_STAND_IN} cannot be isolated: it is the unprivileged id the world's root (id 0) "
                    "acts as; choose another")


__all__ = ["ROOT_STAND_IN", "check_isolable", "declared_id", "kernel_id"]
