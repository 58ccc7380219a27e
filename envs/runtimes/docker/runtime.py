"""The ``docker`` runtime: each world in a locked-down container, from a warm pool.

Every Docker SDK call goes through :class:`.engine.Engine` (which imports the SDK lazily, so ``import
litmus_replay.envs`` works without it; constructing the runtime then says what is missing).

Each container runs the env server (``python3 -m litmus_replay.envs.server --connect ...``) from the
host's ``envs/``, pyfakefs and the code its world's domains need (see :mod:`..hosting`), mounted
read-only, with no network, a read-only root, tmpfs at ``/world`` and ``/tmp`` (``nosuid,nodev``,
size-limited), every capability dropped but the few the server needs, ``no-new-privileges`` and pids,
memory and CPU limits. No host directory is writable inside: the host listens on a unix socket in a
directory of its own, bound in read-only, the server connects to it once, and the host then closes the
listener and removes the socket, so nothing in the container can reach the host's side again, nor leave
a file (a setuid binary, a disk-filling one) where the host would see it. No published port.

Containers are pooled: closing a world sends ``close`` and keeps the container for the next world
(``pool_size`` idle ones at most) — unless the world called a tool of a domain that does not declare
itself contained (see :mod:`..hosting`), which may have left files in the container's /tmp that the next
``load`` would not clear. A container's mounts are fixed when it starts, so a world goes to a container
made for its mounts. Each carries labels naming its owner (host, pid and the pid's start time) and
session, so it is removed on :meth:`DockerRuntime.close`, on Ctrl-C or an error (through the ``with``
block or ``close``), in a command-line process also at interpreter exit (``atexit``) and on SIGTERM (see
:func:`clean_up_at_exit`: a library installs neither), and — after a SIGKILL — by the reaper the next
docker runtime runs when it is constructed.
"""

from __future__ import annotations

import atexit
import os
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Iterable, Mapping

from ...client import EnvClient
from ...domain import Semantics
from ...errors import EnvError, RuntimeUnavailable
from ...interface import Runtime, WorldHandle
from ...principal_ids import check_isolable
from ...world import parse_principals
from .. import hosting
from ..hosting import Mount
from ..pool import Pool, PooledWorld, open_on
from . import image as env_image
from .confinement import host_notice, seccomp_profile
from ..owner import start_time
from .engine import HINT, HOST, LABEL, OWNER, OWNER_START, SESSION, SOCKDIR, Engine, MissingImage, _sockdir_prefix, reap

SOCKET_DIR = "/run/litmus"
SOCKET_NAME = "env.sock"
SERVER_COMMAND = ["python3", "-m", "litmus_replay.envs.server", "--connect", f"{SOCKET_DIR}/{SOCKET_NAME}",
                  "--isolated", "--switch-uid", "--world-root", "/world", "--pids-cgroup"]
# The env server runs as root in the container and needs exactly these:
CAPABILITIES = [
    "CHOWN",         # lay out world files owned by their principals, and hand created entries to the actor
    "SETUID",        # seteuid to the principal for each real call, and back (the kernel then decides access)
    "SETGID",        # setegid likewise, and setgroups([]) so no supplementary group leaks into a call
    "FOWNER",        # tear a world down: unlink in a sticky dir one principal owns, of a file another owns
    "DAC_OVERRIDE",  # between calls: build, snapshot and tear down a world whatever modes its principals set
    "SETPCAP",       # exec every command without capabilities: an empty bounding set, securebits
]
# Only in a container made for a world whose domains run commands in a root made from the world (a shell):
# a mount namespace and a chroot per command, made in the forked child, which then sheds every capability.
# CAP_SYS_ADMIN is the host's here (no user namespace), so no other container holds it, and such a container
# gets the shipped seccomp profile, which refuses user namespaces (see .confinement).
COMMAND_ROOT_CAPABILITIES = ["SYS_ADMIN", "SYS_CHROOT"]


# --- removal at exit and on SIGTERM ----------------------------------------------------------

_LIVE: dict[str, "DockerRuntime"] = {}
_LIVE_LOCK = threading.Lock()
_hooks_installed = False
_previous_sigterm: Any = None
_clean_up_at_exit = False  # set by the command line (clean_up_at_exit): a library installs no hook of its own


def _remove_sessions(sessions: Iterable[str]) -> None:
    """Remove every container of these sessions through a fresh client (safe inside a signal handler)."""
    sessions = list(sessions)
    if not sessions:
        return
    try:
        engine = Engine.connect(timeout=10)
    except RuntimeUnavailable:
        return
    try:
        for session in sessions:
            for container in engine.labelled(**{SESSION: session}):
                engine.remove(container.id)
    except Exception as exc:  # at exit, say what was left rather than raise
        print(f"litmus-replay: could not remove docker containers of session(s) {', '.join(sessions)}: {exc}",
              file=sys.stderr)
    finally:
        engine.close()


def _at_exit() -> None:
    with _LIVE_LOCK:
        runtimes = list(_LIVE.values())
    for runtime in runtimes:
        try:
            runtime.close()
        except Exception as exc:  # at exit, one line rather than a traceback
            print(f"litmus-replay: {exc}", file=sys.stderr)


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    with _LIVE_LOCK:
        live = dict(_LIVE)
        _LIVE.clear()
    _remove_sessions(live)
    for runtime in live.values():
        runtime._forget_sockets()
    if callable(_previous_sigterm):
        _previous_sigterm(signum, frame)
        return
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    os.kill(os.getpid(), signal.SIGTERM)


def clean_up_at_exit() -> None:
    """Also remove this process's containers at interpreter exit and on SIGTERM, not only when a runtime
    is closed: for a command-line process, which owns its exit and its signals. A program that uses the
    library keeps its own: it closes what it opens (``with get_runtime("docker") as runtime: ...``, or
    ``runtime.close()``), and what a SIGKILL leaves, the next docker runtime removes."""
    global _clean_up_at_exit
    _clean_up_at_exit = True
    with _LIVE_LOCK:
        live = bool(_LIVE)
    if live:
        _install_hooks()


def _install_hooks() -> None:
    global _hooks_installed, _previous_sigterm
    if _hooks_installed or not _clean_up_at_exit:
        return
    _hooks_installed = True
    atexit.register(_at_exit)
    if threading.current_thread() is threading.main_thread():
        current = signal.getsignal(signal.SIGTERM)
        if current is not signal.SIG_IGN:
            _previous_sigterm = current if callable(current) else None
            signal.signal(signal.SIGTERM, _on_sigterm)


# --- the runtime -----------------------------------------------------------------------------


@dataclass(eq=False)
class _Slot:
    """One container and the connection to its env server."""

    container_id: str
    sockdir: Path
    sock: socket.socket | None = None
    client: EnvClient | None = None
    tainted: bool = False  # ran a tool that may leave state outside the world root: never reuse
    worlds: int = 0

    def alive(self) -> bool:
        return True  # a dead server shows as a broken client, which the pool checks too


class DockerRuntime(Runtime):
    """Worlds in containers (real semantics by the kernel: each call under the principal's uid).

    Options: ``image`` (default: the tag for this envs code, built on first use), ``pool_size`` (idle
    containers kept warm; 0 = a fresh container per world), ``call_timeout``/``start_timeout`` (s),
    ``memory``, ``cpus``, ``pids``, ``world_size`` (the /world tmpfs), ``build`` (build a missing image).
    """

    name = "docker"

    def __init__(self, *, image: str | None = None, pool_size: int = 2, call_timeout: float = 30.0,
                 start_timeout: float = 30.0, memory: str = "512m", cpus: float = 1.0, pids: int = 256,
                 world_size: str = "256m", build: bool = True):
        if pool_size < 0:
            raise ValueError("pool_size must be >= 0")
        self.engine = Engine.connect()
        reap(self.engine)
        self.image = image or env_image.image_tag()
        self._build = build and image is None
        if not self.engine.has_image(self.image):
            if not self._build:
                raise RuntimeUnavailable(f"the image {self.image} is missing: run `litmus-replay image build --offline`, {HINT}")
            env_image.ensure_image(self.engine, self.image)
        self.pool_size = pool_size
        self.call_timeout = call_timeout
        self.start_timeout = start_timeout
        self.limits = {"memory": memory, "cpus": cpus, "pids": pids, "world_size": world_size}
        self.session = uuid.uuid4().hex
        self.notice = host_notice(self.engine.info())
        self.pool: Pool[_Slot] = Pool(self._start, self._discard, idle=pool_size,
                                      close_timeout=min(call_timeout, 10.0))
        self._sockdirs: set[Path] = set()
        self._lock = threading.Lock()
        self._closed = False  # no new worlds
        self._done = False  # every container removed
        self._started = 0
        self._labels = {LABEL: "1", OWNER: str(os.getpid()), OWNER_START: start_time(os.getpid()) or "",
                        HOST: socket.gethostname(), SESSION: self.session}
        with _LIVE_LOCK:
            _LIVE[self.session] = self
        _install_hooks()

    # worlds

    def open_world(self, spec: Mapping[str, Any], semantics: Semantics) -> WorldHandle:
        if self._closed:
            raise EnvError("the docker runtime is closed")
        plan = hosting.plan(spec, semantics, self.name, foreign_python=True)
        if not plan.inside:
            return hosting.open_in_process(self.name, plan, spec, semantics)
        check_isolable(parse_principals(spec.get("principals")))

        def load(slot: _Slot) -> None:
            assert slot.client is not None
            slot.client.request("load", spec=dict(spec), semantics=semantics, imports=list(plan.imports))

        return open_on(self.pool, plan.key(), load, plan.call_timeout(self.call_timeout), plan.uncontained_tools)

    def container_of(self, handle: WorldHandle) -> str:
        """The id of the container hosting an open world (for diagnostics)."""
        if not isinstance(handle, PooledWorld) or handle.host not in self.pool.hosts():
            raise LookupError("not an open world of this runtime")
        return handle.host.container_id

    @property
    def idle(self) -> int:
        return self.pool.idle

    # containers

    def _start(self, key: tuple[tuple[Mount, ...], bool]) -> _Slot:
        mounts, command_root = key
        sockdir = Path(tempfile.mkdtemp(prefix=_sockdir_prefix()))
        with self._lock:
            self._sockdirs.add(sockdir)
            self._started += 1
            number = self._started
        slot = _Slot("", sockdir)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            path = str(sockdir / SOCKET_NAME)
            listener.bind(path)
            os.chmod(path, 0o600)  # the server connects as the container's root (CAP_DAC_OVERRIDE)
            listener.listen(1)
            container = self._run(self._container_options(sockdir, number, mounts, command_root))
            slot.container_id = container.id
            if self._closed:  # closed while it started (a worker ending with its batch): not kept
                raise EnvError("the docker runtime is closed")
            self._connect(slot, listener)
        except BaseException:
            self._discard(slot)
            raise
        finally:
            listener.close()
            try:
                os.unlink(sockdir / SOCKET_NAME)  # nothing can connect again
            except OSError:
                pass
        return slot

    def _run(self, options: dict[str, Any]) -> Any:
        try:
            return self.engine.run(self.image, **options)
        except MissingImage:
            if not self._build:
                raise
        with self._lock:  # another version's build removed it as older: build it again, once
            env_image.ensure_image(self.engine, self.image)
        return self.engine.run(self.image, **options)

    def _container_options(self, sockdir: Path, number: int, mounts: tuple[Mount, ...] = (),
                           command_root: bool = False) -> dict[str, Any]:
        volumes = {mount.source: {"bind": mount.destination, "mode": "ro"}
                   for mount in (*hosting.base_mounts(foreign_python=True), *mounts)}
        volumes[str(sockdir)] = {"bind": SOCKET_DIR, "mode": "ro"}
        limits = self.limits
        return {
            "command": SERVER_COMMAND,
            "name": f"litmus-replay-{self.session[:12]}-{number}",
            "labels": {**self._labels, SOCKDIR: str(sockdir)},
            "environment": dict(env_image.IMAGE_ENV),
            "volumes": volumes,
            "network_mode": "none",
            "read_only": True,
            "tmpfs": {"/world": f"rw,exec,nosuid,nodev,size={limits['world_size']},mode=0755",
                      "/tmp": "rw,noexec,nosuid,nodev,size=64m,mode=1777"},
            "cap_drop": ["ALL"],
            "cap_add": list(CAPABILITIES) + (COMMAND_ROOT_CAPABILITIES if command_root else []),
            "security_opt": ["no-new-privileges"] + ([f"seccomp={seccomp_profile()}"] if command_root else []),
            "pids_limit": int(limits["pids"]),
            "mem_limit": limits["memory"],
            "memswap_limit": limits["memory"],
            "nano_cpus": int(float(limits["cpus"]) * 1e9),
            "user": "0:0",
            "working_dir": "/",
            "stdin_open": False,
        }

    def _connect(self, slot: _Slot, listener: socket.socket) -> None:
        """Accept the server's one connection, and check it speaks our protocol."""
        deadline = time.monotonic() + self.start_timeout
        while True:
            now = time.monotonic()
            if now >= deadline:
                raise RuntimeUnavailable(f"the env server did not connect within {self.start_timeout:g} s")
            listener.settimeout(min(0.5, deadline - now))
            try:
                sock, _ = listener.accept()
                break
            except socket.timeout:
                pass
            state, logs = self.engine.status(slot.container_id)
            if state not in ("created", "running"):
                raise RuntimeUnavailable(f"the env server container exited ({state}): {logs.strip()[-500:]}")
        sock.settimeout(None)
        slot.sock = sock
        slot.client = EnvClient(sock.fileno(), sock.fileno(), timeout=self.call_timeout)
        slot.client.hello()

    def _discard(self, slot: _Slot) -> None:
        """Drop a container: the client is marked broken first so nothing writes to a recycled fd."""
        if slot.client is not None:
            slot.client.broken = True
        if slot.sock is not None:
            slot.sock.close()
            slot.sock = None
        try:
            if slot.container_id:
                self.engine.remove(slot.container_id)
        finally:
            shutil.rmtree(slot.sockdir, ignore_errors=True)
            with self._lock:
                self._sockdirs.discard(slot.sockdir)

    def _forget_sockets(self) -> None:
        """After the containers were removed elsewhere (SIGTERM): close connections, drop directories."""
        self._closed = self._done = True
        for slot in self.pool.drain():
            if slot.client is not None:
                slot.client.broken = True
            if slot.sock is not None:
                slot.sock.close()
        self._drop_sockdirs()

    def _drop_sockdirs(self) -> None:
        """Every socket directory this runtime made, including one of a container caught mid-release."""
        with self._lock:
            sockdirs, self._sockdirs = self._sockdirs, set()
        for sockdir in sockdirs:
            shutil.rmtree(sockdir, ignore_errors=True)

    def close(self) -> None:
        """Remove every container of this runtime, pooled or in use, and whatever a Ctrl-C left mid-start.

        If something could not be removed the runtime stays registered, so the exit hook tries again."""
        if self._done:
            return
        self._closed = True
        errors: list[Exception] = []
        for slot in self.pool.drain():
            try:
                self._discard(slot)
            except Exception as exc:
                errors.append(exc)
        try:
            for container in self.engine.labelled(**{SESSION: self.session}):
                self.engine.remove(container.id)
        except Exception as exc:
            errors.append(exc)
        if errors:
            raise EnvError(f"could not remove every container of docker session {self.session}: {errors[0]}")
        self._drop_sockdirs()
        self._done = True
        with _LIVE_LOCK:
            _LIVE.pop(self.session, None)
        self.engine.close()

