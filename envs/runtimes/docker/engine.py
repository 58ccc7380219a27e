"""The Docker engine behind one class (every Docker SDK call), and who owns a container.

The SDK is imported lazily, so importing this module works without it; :meth:`Engine.connect` then says
what is missing. Containers carry labels naming their owner (host, pid and the pid's start time) and session,
so :func:`reap` can remove a SIGKILLed run's leftovers.
"""

from __future__ import annotations

import os
import shutil
import socket
from pathlib import Path
from typing import Any

from ...errors import RuntimeUnavailable
from ..owner import alive, owned_prefix, reap_dirs

LABEL = "litmus-replay"
OWNER, OWNER_START, HOST, SESSION, SOCKDIR = (f"{LABEL}.{k}" for k in ("owner", "owner-start", "host", "session", "sockdir"))
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


class MissingImage(RuntimeUnavailable):
    """The image a container is to be made from is not in the engine."""


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

    def info(self) -> dict[str, Any]:
        """What ``docker info`` says of the engine and its host (security options, cgroup version)."""
        return dict(self.client.info())

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

    def labelled_images(self, label: str) -> list[tuple[str, list[str]]]:
        """(id, tags) of every image carrying ``label``."""
        return [(image.id, list(image.tags)) for image in self.client.images.list(filters={"label": [label]})]

    def images_in_use(self) -> set[str]:
        """The ids of the images any container here, running or not, was made from."""
        return {str(container.get("ImageID")) for container in self.client.api.containers(all=True)}

    def untag(self, reference: str) -> bool:
        """Remove the tag ``reference`` (and the image, if that was its last tag and no container uses it);
        False when the engine refuses (a container made from it meanwhile) or it is already gone."""
        from docker.errors import APIError, ImageNotFound

        try:
            self.client.images.remove(reference)
        except ImageNotFound:
            return False
        except APIError as exc:
            if exc.status_code == 409:  # in use
                return False
            raise
        return True

    # containers
    def run(self, image: str, **options: Any) -> Any:
        """Create and start a container; :class:`MissingImage` if ``image`` is not here (an env image is
        built, never pulled: another version's build may have removed it as older, see :mod:`.prune`)."""
        from docker.errors import ImageNotFound

        try:
            container = self.client.containers.create(image, **options)
        except ImageNotFound:
            raise MissingImage(f"the image {image} is not here (removed as older by another version's build?)") from None
        container.start()
        return container

    def status(self, container_id: str) -> tuple[str, str]:
        """The container's state and the tail of its logs (for a server that died on start)."""
        container = self.client.containers.get(container_id)
        logs = container.logs(tail=20).decode("utf-8", "replace") if container.status != "running" else ""
        return container.status, logs

    def inspect(self, container_id: str) -> dict[str, Any]:
        return self.client.api.inspect_container(container_id)

    def labelled(self, **labels: str) -> list[Any]:
        wanted = [f"{k}={v}" if v else k for k, v in labels.items()]
        # a container removed between the listing and its inspection (another process reaping) is gone anyway
        return self.client.containers.list(all=True, filters={"label": wanted}, ignore_removed=True)

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


def _sockdir_prefix() -> str:
    """Socket directories are named for their owner process, so the reaper can tell a dead run's."""
    return owned_prefix(SOCKET_PREFIX)


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
        if alive(pid, labels.get(OWNER_START) or None):
            continue
        engine.remove(container.id)
        removed.append(container.id)
    reap_dirs(SOCKET_PREFIX, lambda path: shutil.rmtree(path, ignore_errors=True))
    return removed
