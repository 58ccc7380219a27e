"""The env image: a base with ``python3`` and nothing else, built without an image registry if need be.

The envs code is not baked in: the docker runtime mounts the host's ``envs/`` read-only. The tag still
carries the package version and a short hash of the ``envs/`` sources (``litmus-replay-env:0.1.0-1a2b3c4d5e6f``)
so an image is always traceable to the code that was validated against it, and changed envs code never
silently runs on an image built for older code.

Two ways to build:

* ``registry``: ``docker build`` from the shipped ``Dockerfile`` (``python:3.12-slim``); needs a registry.
* ``offline``: ``debootstrap --variant=minbase --include=python3`` from the suite and mirror apt is
  configured with on this machine (read at run time, never written down), then ``docker import`` of
  the tree. The tree is kept as a tarball in the cache directory, so a rebuild (new envs hash) is one
  import, seconds instead of minutes.

``auto`` (what the runtime does on first use) picks ``registry`` when the Dockerfile's base image is
already present locally, else ``offline`` when ``debootstrap`` can run (root), else tries ``registry``.
Either way, a build then removes the older env images no container uses (:mod:`.prune`), and says so.
The engine is reached only through :mod:`.engine`, the one module that uses the Docker SDK.
"""

from __future__ import annotations

import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Literal, Protocol, TextIO

from ...errors import RuntimeUnavailable
from . import prune
from .engine import Engine as DockerEngine

IMAGE_REPOSITORY = "litmus-replay-env"
DOCKERFILE = Path(__file__).with_name("Dockerfile")
BASE_IMAGE = "python:3.12-slim"
ENVS_DIR = Path(__file__).resolve().parents[2]
# Written into the image by `docker import` (a Dockerfile sets the same): the runtime mounts the package here.
IMAGE_ENV = {"PYTHONPATH": "/opt/litmus", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"}
TRIM = ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/doc", "usr/share/man", "usr/share/info")

BuildMode = Literal["auto", "offline", "registry"]


class Engine(prune.Engine, Protocol):
    """What a build needs from the engine (pruning included); :class:`.engine.Engine` provides it."""

    def has_image(self, reference: str) -> bool: ...

    def import_tarball(self, path: Path, tag: str, changes: list[str]) -> None: ...

    def build_dockerfile(self, dockerfile: Path, tag: str, labels: dict[str, str]) -> None: ...


# --- the tag -----------------------------------------------------------------------------------


def envs_version() -> str:
    try:
        from importlib.metadata import version

        return version("litmus-replay")
    except Exception:  # a bare checkout without metadata
        return "0"


def envs_digest(root: Path = ENVS_DIR) -> str:
    """A short hash of every source file under ``envs/`` (paths and contents), plus the Dockerfile."""
    digest = hashlib.sha256()
    files = sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                   and p.suffix in (".py", "") and not p.name.startswith("."))
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def image_tag() -> str:
    return f"{IMAGE_REPOSITORY}:{envs_version()}-{envs_digest()}"


def image_labels() -> dict[str, str]:
    return {"litmus-replay.envs-version": envs_version(), prune.IMAGE_LABEL: envs_digest()}


# --- apt's configured sources ------------------------------------------------------------------


@dataclass(frozen=True)
class AptSource:
    uri: str
    suite: str
    components: tuple[str, ...]
    signed_by: str | None = None


def _one_line_sources(text: str) -> list[AptSource]:
    sources = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line.startswith("deb "):
            continue
        words = line.split()[1:]
        signed_by = None
        if words and words[0].startswith("["):
            options = []
            while words:
                word = words.pop(0)
                options.append(word.strip("[]"))
                if word.endswith("]"):
                    break
            for option in options:
                if option.startswith("signed-by="):
                    signed_by = option.split("=", 1)[1]
        if len(words) >= 2:
            sources.append(AptSource(words[0], words[1], tuple(words[2:]), signed_by))
    return sources


def _deb822_sources(text: str) -> list[AptSource]:
    sources = []
    for stanza in text.split("\n\n"):
        fields: dict[str, str] = {}
        key = None
        for raw in stanza.splitlines():
            if raw.startswith("#") or not raw.strip():
                continue
            if raw[0] in " \t" and key:
                fields[key] += " " + raw.strip()
            elif ":" in raw:
                key, value = raw.split(":", 1)
                key = key.strip().lower()
                fields[key] = value.strip()
        if "deb" not in fields.get("types", "").split() or fields.get("enabled", "yes").lower() == "no":
            continue
        signed_by = fields.get("signed-by")
        if signed_by and not signed_by.startswith("/"):
            signed_by = None  # an inline key block: debootstrap cannot take it, use its default keyring
        for uri in fields.get("uris", "").split():
            for suite in fields.get("suites", "").split():
                sources.append(AptSource(uri, suite, tuple(fields.get("components", "").split()), signed_by))
    return sources


def apt_sources(etc_apt: Path = Path("/etc/apt")) -> list[AptSource]:
    """Every enabled ``deb`` source, in apt's order: sources.list, then sources.list.d/ (.list and .sources)."""
    sources: list[AptSource] = []
    main = etc_apt / "sources.list"
    if main.is_file():
        sources += _one_line_sources(main.read_text(errors="replace"))
    parts = etc_apt / "sources.list.d"
    for path in sorted(parts.glob("*")) if parts.is_dir() else ():
        if path.suffix == ".list":
            sources += _one_line_sources(path.read_text(errors="replace"))
        elif path.suffix == ".sources":
            sources += _deb822_sources(path.read_text(errors="replace"))
    return sources


def _codename(os_release: Path = Path("/etc/os-release")) -> str | None:
    try:
        for line in os_release.read_text().splitlines():
            if line.startswith("VERSION_CODENAME="):
                return line.split("=", 1)[1].strip().strip('"') or None
    except OSError:
        pass
    return None


def base_source(sources: list[AptSource], codename: str | None = None) -> AptSource:
    """The release suite to bootstrap: this system's codename if a source carries it, else the first
    source whose suite is a release (not -updates, -security, -backports)."""
    codename = codename if codename is not None else _codename()
    releases = [s for s in sources if "-" not in s.suite and "/" not in s.suite]
    for source in releases:
        if source.suite == codename:
            return source
    if releases:
        return releases[0]
    raise RuntimeUnavailable("no release suite among apt's configured sources (/etc/apt/sources.list, "
                             "/etc/apt/sources.list.d/): cannot debootstrap an offline image; build with a registry")


# --- building ----------------------------------------------------------------------------------


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "litmus-replay"


def _progress(stream: TextIO | None) -> Callable[[str], None]:
    def say(message: str) -> None:
        if stream is not None:
            print(f"litmus-replay: {message}", file=stream, flush=True)

    return say


def _unmount_under(directory: Path) -> None:
    """A failed debootstrap can leave /proc or /sys mounted in its target: never rmtree through them."""
    try:
        mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    except OSError:
        return
    prefix = str(directory.resolve()) + "/"
    for mount in sorted((m for m in mounts if m.startswith(prefix)), key=len, reverse=True):
        subprocess.run(["umount", "-l", mount], check=False)


def _arch() -> str:
    try:
        return subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return platform.machine()


def rootfs_tarball(source: AptSource, say: Callable[[str], None], cache: Path | None = None) -> Path:
    """The debootstrapped tree as a gzipped tarball in the cache, made once per (suite, arch, mirror)."""
    cache = cache or cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    mirror_key = hashlib.sha256(source.uri.encode()).hexdigest()[:8]
    tarball = cache / f"rootfs-{source.suite}-{_arch()}-{mirror_key}-minbase-python3.tar.gz"
    if tarball.is_file():
        say(f"using the cached base tree {tarball}")
        return tarball
    if shutil.which("debootstrap") is None:
        raise RuntimeUnavailable("debootstrap is not installed (apt-get install debootstrap), and no cached base tree "
                                 f"in {cache}: cannot build the env image offline")
    if os.geteuid() != 0:
        raise RuntimeUnavailable("debootstrap needs root: run `litmus-replay image build --offline` as root once "
                                 "(or build with a registry)")
    work = Path(tempfile.mkdtemp(prefix="debootstrap-", dir=cache))
    tree, log = work / "tree", cache / "debootstrap.log"
    command = ["debootstrap", "--variant=minbase", "--include=python3"]
    if source.components:
        command.append(f"--components={','.join(source.components)}")
    if source.signed_by and Path(source.signed_by).is_file():
        command.append(f"--keyring={source.signed_by}")
    command += [source.suite, str(tree), source.uri]
    say(f"debootstrap {source.suite} with python3 from apt's configured mirror (a few minutes; log: {log})")
    try:
        with open(log, "wb") as out:
            done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        if done.returncode != 0:
            raise RuntimeUnavailable(f"debootstrap failed (exit {done.returncode}); see {log}")
        for part in TRIM:
            target = tree / part
            if target.is_dir():
                for child in target.iterdir():
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
        say("packing the base tree")
        partial = work / "rootfs.tar.gz"
        subprocess.run(["tar", "--numeric-owner", "-C", str(tree), "-czf", str(partial), "."], check=True)
        os.replace(partial, tarball)
    finally:
        _unmount_under(work)
        shutil.rmtree(work, ignore_errors=True)
    return tarball


def import_changes(labels: dict[str, str]) -> list[str]:
    """The image configuration ``docker import`` sets (what the Dockerfile's ENV/CMD/LABEL say)."""
    changes = [f"ENV {key}={value}" for key, value in IMAGE_ENV.items()]
    changes += [f'LABEL {key}="{value}"' for key, value in labels.items()]
    changes.append('CMD ["python3"]')
    return changes


def build_image(engine: Engine, tag: str | None = None, mode: BuildMode = "auto",
                progress: TextIO | None = sys.stderr) -> str:
    """Build the env image under ``tag`` (default :func:`image_tag`) and return the tag."""
    tag = tag or image_tag()
    say = _progress(progress)
    if mode == "auto":
        cached = any(cache_dir().glob("rootfs-*.tar.gz"))
        can_bootstrap = cached or (shutil.which("debootstrap") is not None and os.geteuid() == 0)
        mode = "registry" if engine.has_image(BASE_IMAGE) or not can_bootstrap else "offline"
    if mode == "registry":
        say(f"building {tag} from {DOCKERFILE.name} ({BASE_IMAGE})")
        engine.build_dockerfile(DOCKERFILE, tag, image_labels())
    else:
        source = base_source(apt_sources())
        tarball = rootfs_tarball(source, say)
        say(f"importing {tarball.name} as {tag}")
        engine.import_tarball(tarball, tag, import_changes(image_labels()))
    say(f"built {tag}")
    try:
        removed = prune.prune_images(engine, tag)
    except Exception as exc:  # the build stands; what is left is only disk space
        say(f"older env images left in place: {str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__}")
    else:
        if removed:
            say(prune.describe(removed))
    return tag


def ensure_image(engine: Engine, tag: str, progress: TextIO | None = sys.stderr) -> str:
    """The runtime's first use: build the image if the engine does not have it."""
    if not engine.has_image(tag):
        _progress(progress)(f"the env image {tag} is missing; building it (first use of this envs code)")
        build_image(engine, tag, "auto", progress)
    return tag


def build(tag: str | None = None, offline: bool = False, progress: TextIO | None = sys.stderr) -> str:
    """``litmus-replay image build [--offline] [--tag T]``: connect to the engine and build."""
    engine = DockerEngine.connect()
    try:
        return build_image(engine, tag, "offline" if offline else "registry", progress)
    finally:
        engine.close()
