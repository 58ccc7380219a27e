"""How the sandbox maps ids into its user namespace, for root and for an ordinary user.

Inside, the env server is uid 0 and the principals have their declared ids (10001 and up by default,
nobody 65534), so the namespace needs inner ids 0-65535. Three ways to get them:

- ``host-range`` (the host's root): inner 0-65535 onto host ids ``uid_base`` and up, written by the
  runtime itself (only ``CAP_SETUID`` in the parent namespace may map a range).
- ``subordinate`` (an ordinary user, as rootless Podman does): inner 0 onto the user's own uid and gid,
  inner 1-65535 onto the first 65,535 ids of the user's subordinate range in ``/etc/subuid`` and
  ``/etc/subgid``, written by the setuid helpers ``newuidmap`` and ``newgidmap`` (Debian: ``uidmap``).
  Every principal still has a uid of its own, so the kernel still decides file access.
- ``single-uid`` (an ordinary user without a range or the helpers): inner 0 onto the user's own uid
  only (root: onto ``uid_base``), ``setgroups`` denied, as an unprivileged process may. Every principal
  then shares that uid: the files domain checks permissions itself and shell commands run without
  capabilities, in a pid namespace of their own (the server's uid is theirs too), but can touch every
  principal's files. The runtime says so once (:attr:`IdMap.notice`).
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from dataclasses import dataclass

UID_COUNT = 65536  # inner ids 0..65535: root, the principals and nobody
MODES = ("auto", "host-range", "subordinate", "single-uid")
SUBUID, SUBGID = "/etc/subuid", "/etc/subgid"
FULL_MODE_HOWTO = ("for a uid per principal: apt-get install uidmap, and give {user} 65536 subordinate ids "
                   "(usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {user})")

# Kernel settings that switch user namespaces off: (file, name, the value that does, one that does not,
# whether it only concerns ordinary users).
_SWITCHES = (
    ("/proc/sys/user/max_user_namespaces", "user.max_user_namespaces", "0", "15000", False),
    ("/proc/sys/kernel/unprivileged_userns_clone", "kernel.unprivileged_userns_clone", "0", "1", True),
    ("/proc/sys/kernel/apparmor_restrict_unprivileged_userns", "kernel.apparmor_restrict_unprivileged_userns",
     "1", "0", True),
)


class MappingUnavailable(Exception):
    """The asked-for mapping cannot be made here; the message says why and what would fix it."""


@dataclass(frozen=True)
class IdMap:
    """One sandbox's id maps: lines of ``(inner, host, count)``, and how they are written."""

    mode: str
    uid_lines: tuple[tuple[int, int, int], ...]
    gid_lines: tuple[tuple[int, int, int], ...]
    helpers: tuple[str, str] | None = None  # newuidmap, newgidmap: written through them
    setgroups: bool = True  # False: "deny" is written first, and nothing inside may call setgroups
    why_single: str = ""  # single-uid mode: what was missing for the full mode
    user: str = ""

    @property
    def shared_uid(self) -> bool:
        """Whether every principal shares the server's one uid."""
        return self.mode == "single-uid"

    @property
    def staged_by_host_root(self) -> bool:
        """Root stages the read-only binds before entering the namespace (it reads what no mapped uid
        may); an ordinary user's own uid is inner root, so it stages them inside."""
        return self.mode == "host-range" or (self.mode == "single-uid" and os.geteuid() == 0)

    @property
    def notice(self) -> str | None:
        """One line saying what is weaker than the full mode, and how to get the full mode."""
        if not self.shared_uid:
            return None
        return (f"sandbox: {self.why_single}, so every principal shares one uid: the files domain checks each "
                "principal's permissions itself, but shell commands can touch every principal's files; "
                + FULL_MODE_HOWTO.format(user=self.user or "$USER"))

    def host_uid(self, inner: int) -> int | None:
        """The host uid an inner uid maps to (None: unmapped)."""
        for start, host, count in self.uid_lines:
            if start <= inner < start + count:
                return host + inner - start
        return None

    def write(self, pid: int) -> None:
        """Map the user namespace of ``pid``; raises ``OSError`` with the reason."""
        if self.helpers is not None:
            for helper, lines in zip(self.helpers, (self.uid_lines, self.gid_lines)):
                argv = [helper, str(pid), *(str(n) for line in lines for n in line)]
                done = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True)
                if done.returncode != 0:
                    raise OSError(0, f"{' '.join(argv)}: {done.stderr.strip() or f'exit status {done.returncode}'}")
            return
        if not self.setgroups:
            with open(f"/proc/{pid}/setgroups", "w") as handle:
                handle.write("deny")
        for name, lines in (("uid_map", self.uid_lines), ("gid_map", self.gid_lines)):
            with open(f"/proc/{pid}/{name}", "w") as handle:
                handle.write("".join(f"{a} {b} {c}\n" for a, b, c in lines))


def subordinate_range(path: str, user: str, uid: int, need: int) -> tuple[int, int] | None:
    """The first range of at least ``need`` ids that ``path`` (``/etc/subuid`` format) gives the user."""
    try:
        with open(path) as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    for line in lines:
        fields = line.strip().split(":")
        if len(fields) != 3 or fields[0] not in (user, str(uid)):
            continue
        try:
            start, count = int(fields[1]), int(fields[2])
        except ValueError:
            continue
        if start > 0 and count >= need:
            return start, count
    return None


def plan(mode: str, uid_base: int) -> IdMap:
    """The id maps for ``mode`` (``auto``: the strongest this user can have)."""
    uid, gid = os.geteuid(), os.getegid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    if mode in ("auto", "host-range") and uid == 0:
        lines = ((0, uid_base, UID_COUNT),)
        return IdMap("host-range", lines, lines, user=user)
    if mode == "host-range":
        raise MappingUnavailable("host-range ids need root on the host (only root may map a range without "
                                 "subordinate ids); as an ordinary user use id_mapping 'subordinate' or 'single-uid'")
    if mode == "single-uid" and uid == 0:
        lines = ((0, uid_base, 1),)
        return IdMap("single-uid", lines, lines, setgroups=False, why_single="asked to map a single uid", user=user)
    if uid == 0:
        raise MappingUnavailable("subordinate ids are for an ordinary user; as root use id_mapping 'host-range'")
    need = UID_COUNT - 1
    subuid = subordinate_range(SUBUID, user, uid, need)
    subgid = subordinate_range(SUBGID, user, uid, need)
    helpers = shutil.which("newuidmap"), shutil.which("newgidmap")
    missing = []
    if helpers[0] is None or helpers[1] is None:
        missing.append("newuidmap and newgidmap are not installed")
    if subuid is None or subgid is None:
        files = " and ".join(p for p, r in ((SUBUID, subuid), (SUBGID, subgid)) if r is None)
        missing.append(f"{files} give{'s' if ' and ' not in files else ''} {user} no range of {need} ids")
    if mode == "single-uid" or missing:
        if mode == "subordinate":
            raise MappingUnavailable(f"{'; '.join(missing)}; " + FULL_MODE_HOWTO.format(user=user))
        why = " and ".join(missing) if missing else "asked to map a single uid"
        return IdMap("single-uid", ((0, uid, 1),), ((0, gid, 1),), setgroups=False, why_single=why, user=user)
    assert subuid is not None and subgid is not None
    return IdMap("subordinate", ((0, uid, 1), (1, subuid[0], need)), ((0, gid, 1), (1, subgid[0], need)),
                 helpers=(helpers[0], helpers[1]), user=user)  # type: ignore[arg-type]


def userns_disabled(read=None) -> str | None:
    """Which kernel setting switches user namespaces off for this process, if one does."""
    read = read or _read
    unprivileged = os.geteuid() != 0
    for path, name, off, on, only_unprivileged in _SWITCHES:
        if only_unprivileged and not unprivileged:
            continue
        if read(path) == off:
            return f"user namespaces are disabled on this host ({name} = {off}; sysctl -w {name}={on} enables them)"
    return None


def _read(path: str) -> str | None:
    try:
        with open(path) as handle:
            return handle.read().strip()
    except OSError:
        return None


__all__ = ["IdMap", "MappingUnavailable", "MODES", "UID_COUNT", "plan", "subordinate_range", "userns_disabled"]
