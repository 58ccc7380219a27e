"""The ``docker`` runtime: each world in a locked-down container, from a warm pool.

This is the one module that uses the Docker SDK (imported lazily, so ``import litmus_replay.envs`` and
this module work without it; constructing the runtime then says what is missing).

Each container runs the env server (``python3 -m litmus_replay.envs.server --socket ...``) from the
host's ``envs/`` mounted read-only, with no network, a read-only root, tmpfs at ``/world`` and
``/tmp``, every capability dropped but the few the server needs, ``no-new-privileges`` and pids, memory
and CPU limits. The host talks to it over a unix socket in a host directory mounted into the container:
no published port.

Containers are pooled: closing a world sends ``close`` and keeps the container for the next world
(``pool_size`` idle ones at most) — unless the world called a tool outside ``CONTAINED_DOMAINS``,
which may have left files in the container's /tmp that the next ``load`` would not clear. Each carries labels naming its owner (host, pid and the pid's start
time) and session, so it is removed on :meth:`DockerRuntime.close`, on Ctrl-C or an error (through the
``with`` block or ``close``), at interpreter exit (``atexit``), on SIGTERM, and — after a SIGKILL — by
the reaper the next docker runtime runs when it is constructed.
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

from ..client import EnvClient, ServerWorld
from ..domain import Semantics
from ..domains import is_contained_tool
from ..errors import EnvError, RuntimeUnavailable
from ..runtime import Runtime, WorldHandle, register_runtime
from . import image as env_image

LABEL = "litmus-replay"
OWNER, OWNER_START, HOST, SESSION, SOCKDIR = (f"{LABEL}.{k}" for k in ("owner", "owner-start", "host", "session", "sockdir"))
MOUNT_ROOT = "/opt/litmus"
SOCKET_DIR = "/run/litmus"
SOCKET_NAME = "env.sock"
SERVER_COMMAND = ["python3", "-m", "litmus_replay.envs.server", "--socket", f"{SOCKET_DIR}/{SOCKET_NAME}",
                  "--isolated", "--switch-uid", "--world-root", "/world"]
# The env server runs as root in the container and needs exactly these:
CAPABILITIES = [
    "CHOWN",         # lay out world files owned by their principals, and hand created entries to the actor
    "SETUID",        # seteuid to the principal for each real call, and back (the kernel then decides access)
    "SETGID",        # setegid likewise, and setgroups([]) so no supplementary group leaks into a call
    "FOWNER",        # tear a world down: unlink in a sticky dir one principal owns, of a file another owns
    "DAC_OVERRIDE",  # between calls: build, snapshot and tear down a world whatever modes its principals set
]
SOCKET_PREFIX = "litmus-docker-"
HINT = "or choose --runtime sandbox or --runtime inprocess"


def no_engine_message(where: str, failure: str, which: Any = shutil.which) -> str:
    """Why no Docker engine answered, and what to do, in words (never the client library's exception)."""
    lowered = failure.lower()
    if "permission denied" in lowered:
        return (f"a Docker engine listens at {where}, but this user may not use it: add the user to the docker "
                f"group (then log in again), or run as root; {HINT}")
    if which("dockerd") is None and which("docker") is None:
        return ("Docker is not installed here: install the Docker engine (on Debian or Ubuntu: "
                "`apt-get install docker.io`), then start it (`systemctl start docker`, or `dockerd &` as root where "
                f"there is no systemd); {HINT}")
    if which("dockerd") is None:
        return (f"no Docker engine answers at {where}: the docker command is installed but the engine is not, or "
                f"runs elsewhere; start the engine where it is installed, or point DOCKER_HOST at it; {HINT}")
    return (f"the Docker engine is installed but not running (nothing answers at {where}): start it with "
            f"`systemctl start docker`, or `dockerd &` as root where there is no systemd; {HINT}")


# --- the engine: every SDK call --------------------------------------------------------------


class Engine:
    """A connected Docker client, reduced to what the runtime and the image build use."""

    def __init__(self, client: Any):
        self.client = client

    @classmethod
    def connect(cls, timeout: float = 60.0) -> "Engine":
        """Connect and ping, or raise :class:`RuntimeUnavailable` with one line saying what to do."""
        try:
            import docker
        except ImportError:
            raise RuntimeUnavailable(f"the Docker SDK is not installed (pip install 'docker>=7'); {HINT}") from None
        where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
        try:
            client = docker.from_env(timeout=int(timeout))
            client.ping()
        except Exception as exc:
            raise RuntimeUnavailable(no_engine_message(where, str(exc))) from None
        return cls(client)

    def server_version(self) -> str:
        return str(self.client.version().get("Version", "unknown"))

    # images
    def has_image(self, reference: str) -> bool:
        return self._image_id(reference) is not None

    def _image_id(self, reference: str) -> str | None:
        from docker.errors import ImageNotFound

        try:
            return self.client.images.get(reference).id
        except ImageNotFound:
            return None

    def _drop_replaced(self, old: str | None, tag: str) -> None:
        """A rebuild moves the tag: remove the image it left untagged, unless something still uses it."""
        from docker.errors import APIError

        if old is not None and old != self._image_id(tag):
            try:
                self.client.images.remove(old)
            except APIError:
                pass

    def import_tarball(self, path: Path, tag: str, changes: list[str]) -> None:
        repository, _, version = tag.rpartition(":")
        old = self._image_id(tag)
        answer = self.client.api.import_image(src=str(path), repository=repository, tag=version, changes=changes)
        if "error" in str(answer).lower() or not self.has_image(tag):
            raise RuntimeUnavailable(f"docker import of {path} failed: {str(answer).strip()[:300]}")
        self._drop_replaced(old, tag)

    def build_dockerfile(self, dockerfile: Path, tag: str, labels: dict[str, str]) -> None:
        from docker.errors import APIError, BuildError

        old = self._image_id(tag)
        try:
            with open(dockerfile, "rb") as file:
                self.client.images.build(fileobj=file, tag=tag, labels=labels, rm=True, forcerm=True)
        except (BuildError, APIError) as exc:
            raise RuntimeUnavailable(f"cannot build {tag} from {dockerfile.name}: {str(exc).splitlines()[0][:200]}; "
                                     "without an image registry, run `litmus-replay image build --offline`") from None
        self._drop_replaced(old, tag)

    # containers
    def run(self, image: str, **options: Any) -> Any:
        return self.client.containers.run(image, detach=True, **options)

    def status(self, container_id: str) -> tuple[str, str]:
        """The container's state and the tail of its logs (for a server that died on start)."""
        container = self.client.containers.get(container_id)
        logs = container.logs(tail=20).decode("utf-8", "replace") if container.status != "running" else ""
        return container.status, logs

    def inspect(self, container_id: str) -> dict[str, Any]:
        return self.client.api.inspect_container(container_id)

    def labelled(self, **labels: str) -> list[Any]:
        wanted = [f"{k}={v}" if v else k for k, v in labels.items()]
        return self.client.containers.list(all=True, filters={"label": wanted})

    def remove(self, container_id: str) -> None:
        from docker.errors import APIError, NotFound

        try:
            self.client.api.remove_container(container_id, force=True, v=True)
        except NotFound:
            pass
        except APIError as exc:
            if "already in progress" not in str(exc):
                raise

    def close(self) -> None:
        self.client.close()


# --- who owns a container --------------------------------------------------------------------


def _start_time(pid: int) -> str | None:
    """The pid's start time in clock ticks since boot (so a recycled pid is not taken for its owner)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(pid: int, start: str | None) -> bool:
    if Path("/proc/self/stat").exists():
        now = _start_time(pid)
        return now is not None and (start is None or start == now)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _sockdir_prefix() -> str:
    """Socket directories are named for their owner process, so the reaper can tell a dead run's."""
    return f"{SOCKET_PREFIX}{os.getpid()}-{_start_time(os.getpid()) or 0}-"


def _sockdir_owner(path: Path) -> tuple[int, str | None] | None:
    """(pid, start time) from one of our socket directories' names; None for anything else."""
    if path.parent != Path(tempfile.gettempdir()) or not path.name.startswith(SOCKET_PREFIX):
        return None
    pid, start, *_ = path.name[len(SOCKET_PREFIX):].split("-") + ["", ""]
    if not pid.isdigit():
        return None
    return int(pid), (start if start not in ("", "0") else None)


def reap(engine: Engine) -> list[str]:
    """Remove this host's labelled containers whose owner process is gone (a SIGKILLed run's leftovers),
    and such runs' socket directories."""
    removed = []
    here = socket.gethostname()
    for container in engine.labelled(**{OWNER: ""}):
        labels = container.labels or {}
        if labels.get(HOST) != here:
            continue
        try:
            pid = int(labels.get(OWNER, ""))
        except ValueError:
            continue
        if _alive(pid, labels.get(OWNER_START) or None):
            continue
        engine.remove(container.id)
        removed.append(container.id)
    for path in Path(tempfile.gettempdir()).glob(f"{SOCKET_PREFIX}*"):
        owner = _sockdir_owner(path)
        if owner is not None and not _alive(*owner):
            shutil.rmtree(path, ignore_errors=True)
    return removed


# --- removal at exit and on SIGTERM ----------------------------------------------------------

_LIVE: dict[str, "DockerRuntime"] = {}
_LIVE_LOCK = threading.Lock()
_hooks_installed = False
_previous_sigterm: Any = None


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


def _install_hooks() -> None:
    global _hooks_installed, _previous_sigterm
    if _hooks_installed:
        return
    _hooks_installed = True
    atexit.register(_at_exit)
    if threading.current_thread() is threading.main_thread():
        current = signal.getsignal(signal.SIGTERM)
        if current is not signal.SIG_IGN:
            _previous_sigterm = current if callable(current) else None
            signal.signal(signal.SIGTERM, _on_sigterm)


# --- the runtime -----------------------------------------------------------------------------


@dataclass
class _Slot:
    """One container and the connection to its env server."""

    container_id: str
    sockdir: Path
    sock: socket.socket | None = None
    client: EnvClient | None = None
    tainted: bool = False  # ran a tool that may leave state outside the world root: never reuse



class _PooledWorld(ServerWorld):
    """A world in a pooled container; notes a call that makes the container unfit for the next world."""

    def __init__(self, slot: _Slot, release: Any, call_timeout: float):
        assert slot.client is not None
        super().__init__(slot.client, release, call_timeout)
        self._slot = slot

    def call(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if not is_contained_tool(request.get("tool")):
            self._slot.tainted = True
        return super().call(request)


@register_runtime
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
        if not self.engine.has_image(self.image):
            if not build or image is not None:
                raise RuntimeUnavailable(f"the image {self.image} is missing: run `litmus-replay image build --offline`, {HINT}")
            env_image.ensure_image(self.engine, self.image)
        self.pool_size = pool_size
        self.call_timeout = call_timeout
        self.start_timeout = start_timeout
        self.limits = {"memory": memory, "cpus": cpus, "pids": pids, "world_size": world_size}
        self.session = uuid.uuid4().hex
        self._idle: list[_Slot] = []
        self._busy: dict[int, _Slot] = {}
        self._sockdirs: set[Path] = set()
        self._lock = threading.Lock()
        self._closed = False  # no new worlds
        self._done = False  # every container removed
        self._started = 0
        self._labels = {LABEL: "1", OWNER: str(os.getpid()), OWNER_START: _start_time(os.getpid()) or "",
                        HOST: socket.gethostname(), SESSION: self.session}
        with _LIVE_LOCK:
            _LIVE[self.session] = self
        _install_hooks()

    # worlds

    def open_world(self, spec: Mapping[str, Any], semantics: Semantics) -> WorldHandle:
        if self._closed:
            raise EnvError("the docker runtime is closed")
        with self._lock:
            slot = self._idle.pop() if self._idle else None
        if slot is None:
            slot = self._start()
        try:
            assert slot.client is not None
            slot.client.request("load", spec=dict(spec), semantics=semantics)
        except BaseException as exc:
            # a bad spec leaves the server healthy; anything else (or Ctrl-C mid-request) loses the container
            healthy = isinstance(exc, EnvError) and slot.client is not None and not slot.client.broken
            (self._return if healthy else self._discard)(slot)
            raise
        with self._lock:
            self._busy[id(slot.client)] = slot
        return _PooledWorld(slot, self._release, self.call_timeout)

    def container_of(self, handle: WorldHandle) -> str:
        """The id of the container hosting an open world (for diagnostics)."""
        client = getattr(handle, "client", None)
        with self._lock:
            slot = self._busy.get(id(client))
        if slot is None:
            raise LookupError("not an open world of this runtime")
        return slot.container_id

    def _release(self, client: EnvClient) -> None:
        with self._lock:
            slot = self._busy.pop(id(client), None)
        if slot is None:  # the runtime was closed under an open world
            return
        if slot.tainted:
            self._discard(slot)
            return
        try:
            client.request("close", timeout=min(self.call_timeout, 10.0))
        except EnvError:  # a dead or hung server: lose the container, not the caller's exception
            self._discard(slot)
            return
        except BaseException:
            self._discard(slot)
            raise
        self._return(slot)

    def _return(self, slot: _Slot) -> None:
        with self._lock:
            keep = not self._closed and len(self._idle) < self.pool_size
            if keep:
                self._idle.append(slot)
        if not keep:
            self._discard(slot)

    # containers

    def _start(self) -> _Slot:
        sockdir = Path(tempfile.mkdtemp(prefix=_sockdir_prefix()))
        with self._lock:
            self._sockdirs.add(sockdir)
        with self._lock:
            self._started += 1
            number = self._started
        slot = _Slot("", sockdir)
        try:
            container = self.engine.run(self.image, **self._container_options(sockdir, number))
            slot.container_id = container.id
            self._connect(slot)
        except BaseException:
            self._discard(slot)
            raise
        return slot

    def _container_options(self, sockdir: Path, number: int) -> dict[str, Any]:
        envs_dir = Path(__file__).resolve().parent.parent
        volumes = {
            str(envs_dir): {"bind": f"{MOUNT_ROOT}/litmus_replay/envs", "mode": "ro"},
            str(sockdir): {"bind": SOCKET_DIR, "mode": "rw"},
        }
        fakefs = _pyfakefs_dir()
        if fakefs is not None:  # files.py imports pyfakefs at module level (for its stub semantics)
            volumes[str(fakefs)] = {"bind": f"{MOUNT_ROOT}/pyfakefs", "mode": "ro"}
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
            "cap_add": list(CAPABILITIES),
            "security_opt": ["no-new-privileges"],
            "pids_limit": int(limits["pids"]),
            "mem_limit": limits["memory"],
            "memswap_limit": limits["memory"],
            "nano_cpus": int(float(limits["cpus"]) * 1e9),
            "user": "0:0",
            "working_dir": "/",
            "stdin_open": False,
        }

    def _connect(self, slot: _Slot) -> None:
        """Wait for the server's socket, connect, and check it speaks our protocol."""
        path = str(slot.sockdir / SOCKET_NAME)
        deadline = time.monotonic() + self.start_timeout
        next_check = time.monotonic() + 0.5
        while True:
            if os.path.exists(path):
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                try:
                    sock.connect(path)
                    break
                except OSError:
                    sock.close()
            now = time.monotonic()
            if now >= next_check:
                next_check = now + 0.5
                state, logs = self.engine.status(slot.container_id)
                if state not in ("created", "running"):
                    raise RuntimeUnavailable(f"the env server container exited ({state}): {logs.strip()[-500:]}")
            if now >= deadline:
                raise RuntimeUnavailable(f"the env server did not listen within {self.start_timeout:g} s")
            time.sleep(0.005)
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
        with self._lock:
            slots = self._idle + list(self._busy.values())
            self._idle, self._busy = [], {}
        for slot in slots:
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
        with self._lock:
            self._closed = True
            slots = self._idle + list(self._busy.values())
            self._idle, self._busy = [], {}
        errors: list[Exception] = []
        for slot in slots:
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

    @property
    def idle(self) -> int:
        return len(self._idle)


def _pyfakefs_dir() -> Path | None:
    try:
        import pyfakefs
    except ImportError:
        return None
    return Path(pyfakefs.__file__).resolve().parent
