"""How the sandbox maps ids into its user namespace, for root and for an ordinary user.

Inside, the env server is uid 0 and the principals have their declared ids (10001 and up by default,
nobody 65534), so the namespace needs inner ids 0-65535. Three ways to get them:

- ``host-range`` (the host's root): inner 0-65535 onto host ids ``uid_base`` and up, written by the
  runtime itself (only ``CAP_SETUID`` in the parent namespace may map a range). The range must be no
  one else's: the owner of a host id the sandbox uses could signal and trace its processes. By default it
  is the first block of 65,536 from ``HOST_RANGE_BASE`` that no ``/etc/subuid`` or ``/etc/subgid``
  entry, passwd user or group holds (:func:`host_range`); a ``uid_base`` that overlaps one is refused.
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
PASSWD, GROUP = "/etc/passwd", "/etc/group"
# 0x70000000: above every range useradd hands out (subordinate ids from 100000, 65,536 per account) and
# systemd-nspawn's container ranges (524288-1879048191), below ids with the high bit set.
HOST_RANGE_BASE = 0x70000000
HOST_ID_LIMIT = 2**32 - 2  # (uid_t)-1 is "no id"
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


def held_ids() -> list[tuple[int, int, str]]:
    """The host ids someone holds, as ``(start, count, whose)``: every ``/etc/subuid`` and ``/etc/subgid``
    range, every passwd user's uid and every group's gid."""
    held = []
    for path, fields in ((SUBUID, 3), (SUBGID, 3), (PASSWD, 7), (GROUP, 4)):
        try:
            with open(path) as handle:
                lines = handle.read().splitlines()
        except OSError:
            continue
        for line in lines:
            parts = line.strip().split(":")
            if len(parts) < fields or not parts[0] or parts[0].startswith("#"):
                continue
            try:
                start, count = (int(parts[1]), int(parts[2])) if fields == 3 else (int(parts[2]), 1)
            except ValueError:
                continue
            what = "range" if fields == 3 else ("uid" if path == PASSWD else "gid")
            held.append((start, count, f"{path}'s {what} for {parts[0]} ({start}" + (f"-{start + count - 1})" if count > 1 else ")")))
    return held


def _holder(base: int, count: int, held: list[tuple[int, int, str]]) -> tuple[int, int, str] | None:
    return next((entry for entry in held if entry[0] < base + count and base < entry[0] + entry[1]), None)


def _first_free(base: int, count: int, held: list[tuple[int, int, str]]) -> int | None:
    while base + count <= HOST_ID_LIMIT:
        entry = _holder(base, count, held)
        if entry is None:
            return base
        base = -(-(entry[0] + entry[1]) // UID_COUNT) * UID_COUNT  # the next block after it
    return None


def host_range(uid_base: int | None, count: int = UID_COUNT) -> int:
    """Root's first host id for a sandbox: ``uid_base`` if nobody holds any of its ``count`` ids (else
    :class:`MappingUnavailable` with a free one), or by default the first free block from
    :data:`HOST_RANGE_BASE` (see :func:`held_ids`)."""
    held = held_ids()
    if uid_base is None:
        free = _first_free(HOST_RANGE_BASE, count, held)
        if free is None:
            raise MappingUnavailable(f"every block of {count} host ids from {HOST_RANGE_BASE} is held by a user, "
                                     f"a group or a subordinate range; pass uid_base= a range nobody holds")
        return free
    entry = _holder(uid_base, count, held)
    if entry is None:
        return uid_base
    free = _first_free(HOST_RANGE_BASE, count, held)
    fix = f"uid_base={free} (free)" if free is not None else "a uid_base nobody holds"
    raise MappingUnavailable(f"host ids {uid_base}-{uid_base + count - 1} (uid_base) overlap {entry[2]}: its owner "
                             f"could signal and trace every sandbox's processes; use {fix}, or leave uid_base unset")


def plan(mode: str, uid_base: int | None = None) -> IdMap:
    """The id maps for ``mode`` (``auto``: the strongest this user can have); as root, onto
    :func:`host_range` (``uid_base`` None: the first free block)."""
    uid, gid = os.geteuid(), os.getegid()
    try:
        user = pwd.getpwuid(uid).pw_name
    except KeyError:
        user = str(uid)
    if mode in ("auto", "host-range") and uid == 0:
        lines = ((0, host_range(uid_base), UID_COUNT),)
        return IdMap("host-range", lines, lines, user=user)
    if mode == "host-range":
        raise MappingUnavailable("host-range ids need root on the host (only root may map a range without "
                                 "subordinate ids); as an ordinary user use id_mapping 'subordinate' or 'single-uid'")
    if mode == "single-uid" and uid == 0:
        lines = ((0, host_range(uid_base, 1), 1),)
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


__all__ = ["HOST_RANGE_BASE", "IdMap", "MappingUnavailable", "MODES", "UID_COUNT", "held_ids", "host_range", "plan",
           "subordinate_range", "userns_disabled"]
