"""The env image's recipe, without an engine: apt's configured sources are read as apt reads them (the
offline build never names a mirror of its own), the tag follows the envs code, and a build removes the
older images no container uses (against an engine's images held in a dict)."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from litmus_replay.envs import RuntimeUnavailable
from litmus_replay.envs.runtimes.docker import image, prune


def _etc_apt(tmp_path: Path, main: str = "", **parts: str) -> Path:
    (tmp_path / "sources.list.d").mkdir(parents=True)
    if main:
        (tmp_path / "sources.list").write_text(main)
    for name, text in parts.items():
        (tmp_path / "sources.list.d" / name.replace("_", ".")).write_text(text)
    return tmp_path


def test_one_line_sources_with_options_and_comments(tmp_path: Path) -> None:
    etc = _etc_apt(tmp_path, main=(
        "# a comment\n"
        "deb-src http://mirror.test/debian trixie main\n"
        "deb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://mirror.test/debian trixie main contrib\n"
        "deb http://mirror.test/security trixie-security main  # trailing\n"
    ))
    sources = image.apt_sources(etc)
    assert [(s.uri, s.suite) for s in sources] == [("http://mirror.test/debian", "trixie"),
                                                   ("http://mirror.test/security", "trixie-security")]
    assert sources[0].components == ("main", "contrib")
    assert sources[0].signed_by == "/usr/share/keyrings/k.gpg"


def test_deb822_sources_expand_suites_and_skip_disabled(tmp_path: Path) -> None:
    etc = _etc_apt(tmp_path, debian_sources=(
        "Types: deb deb-src\n"
        "URIs: http://mirror.test/debian\n"
        "Suites: bookworm bookworm-updates\n"
        "Components: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"
        "\n"
        "Types: deb\n"
        "URIs: http://other.test/debian\n"
        "Suites: sid\n"
        "Components: main\n"
        "Enabled: no\n"
    ), ignored_list_disabled="deb http://ignored.test/debian sid main\n")
    sources = image.apt_sources(etc)
    assert [(s.uri, s.suite) for s in sources] == [("http://mirror.test/debian", "bookworm"),
                                                   ("http://mirror.test/debian", "bookworm-updates")]
    assert sources[0].signed_by == "/usr/share/keyrings/debian-archive-keyring.gpg"


def test_the_release_suite_is_this_systems_codename_when_offered() -> None:
    sources = [image.AptSource("http://a.test/debian", "bookworm-updates", ("main",)),
               image.AptSource("http://a.test/other", "nodistro", ("main",)),
               image.AptSource("http://a.test/debian", "bookworm", ("main",))]
    assert image.base_source(sources, codename="bookworm").suite == "bookworm"
    assert image.base_source(sources, codename="trixie").suite == "nodistro"  # else the first release suite
    with pytest.raises(RuntimeUnavailable, match="no release suite"):
        image.base_source(sources[:1], codename="bookworm")


def test_the_tag_changes_with_the_envs_code(tmp_path: Path) -> None:
    (tmp_path / "world.py").write_text("A = 1\n")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "world.cpython-311.pyc").write_bytes(b"noise")
    first = image.envs_digest(tmp_path)
    (tmp_path / "__pycache__" / "world.cpython-311.pyc").write_bytes(b"other noise")
    assert image.envs_digest(tmp_path) == first
    (tmp_path / "world.py").write_text("A = 2\n")
    assert image.envs_digest(tmp_path) != first
    assert image.image_tag().startswith(f"{image.IMAGE_REPOSITORY}:{image.envs_version()}-")


def test_import_sets_what_the_dockerfile_sets() -> None:
    changes = image.import_changes({"litmus-replay.envs-digest": "abc"})
    dockerfile = image.DOCKERFILE.read_text()
    for key, value in image.IMAGE_ENV.items():
        assert f"ENV {key}={value}" in changes and f"{key}={value}" in dockerfile
    assert 'LABEL litmus-replay.envs-digest="abc"' in changes


def test_no_mirror_is_written_into_the_code() -> None:
    source = Path(image.__file__).read_text() + Path(image.__file__).with_name("engine.py").read_text() + Path(image.__file__).with_name("runtime.py").read_text()
    assert "deb.debian.org" not in source and "http://" not in source


class _Engine:
    """An engine's images as a dict: id -> (tags, labels); ``used`` are ids containers were made from."""

    def __init__(self, images: dict[str, tuple[list[str], dict[str, str]]], used: set[str] = frozenset()):
        self.images, self.used, self.built = images, set(used), []

    def labelled_images(self, label: str) -> list[tuple[str, list[str]]]:
        return [(i, list(tags)) for i, (tags, labels) in self.images.items() if label in labels]

    def images_in_use(self) -> set[str]:
        return set(self.used)

    def untag(self, reference: str) -> bool:
        for image_id, (tags, _) in list(self.images.items()):
            if reference in tags:
                if image_id in self.used and len(tags) == 1:
                    return False  # the engine refuses: a container uses it
                tags.remove(reference)
                if not tags:
                    del self.images[image_id]
                return True
        return False

    def has_image(self, reference: str) -> bool:
        return any(reference in tags for tags, _ in self.images.values())

    def build_dockerfile(self, dockerfile: Path, tag: str, labels: dict[str, str]) -> None:
        self.built.append(tag)
        self.images[f"sha256:{len(self.images)}"] = ([tag], dict(labels))


def _env(tag: str) -> tuple[list[str], dict[str, str]]:
    return [tag], {prune.IMAGE_LABEL: tag.rsplit("-", 1)[-1]}


def test_pruning_removes_older_env_images_no_container_uses() -> None:
    engine = _Engine({
        "a": _env("litmus-replay-env:0.1.0-aaa"),
        "b": _env("litmus-replay-env:0.1.0-bbb"),  # a stopped container was made from it
        "c": (["litmus-replay-env:0.1.0-ccc", "mine:pinned"], {prune.IMAGE_LABEL: "ccc"}),
        "d": _env("litmus-replay-env:0.1.0-new"),
        "e": (["litmus-replay-env:hand-made"], {}),  # not labelled: not ours to remove
        "f": _env("elsewhere/litmus-replay-env:0.1.0-aaa"),  # another repository
    }, used={"b"})
    removed = prune.prune_images(engine, "litmus-replay-env:0.1.0-new")
    assert removed == ["litmus-replay-env:0.1.0-aaa", "litmus-replay-env:0.1.0-ccc"]
    assert sorted(tag for tags, _ in engine.images.values() for tag in tags) == [
        "elsewhere/litmus-replay-env:0.1.0-aaa", "litmus-replay-env:0.1.0-bbb", "litmus-replay-env:0.1.0-new",
        "litmus-replay-env:hand-made", "mine:pinned"]
    assert prune.prune_images(engine, "litmus-replay-env:0.1.0-new") == []


def test_a_build_removes_the_older_images_and_says_so() -> None:
    engine = _Engine({str(i): _env(f"litmus-replay-env:0.1.0-old{i}") for i in range(6)}, used={"5"})
    said = io.StringIO()
    assert image.build_image(engine, "litmus-replay-env:0.1.0-new", "registry", said) == "litmus-replay-env:0.1.0-new"
    assert engine.built == ["litmus-replay-env:0.1.0-new"]
    assert sorted(tag for tags, _ in engine.images.values() for tag in tags) == [
        "litmus-replay-env:0.1.0-new", "litmus-replay-env:0.1.0-old5"]
    last = said.getvalue().splitlines()[-1]
    assert last.startswith("litmus-replay: removed 5 older env images no container uses: litmus-replay-env:0.1.0-old0")
    assert last.endswith("and 1 more")


def test_a_build_whose_pruning_fails_still_stands() -> None:
    class Refusing(_Engine):
        def images_in_use(self) -> set[str]:
            raise OSError("the engine hung up")

    engine = Refusing({"a": _env("litmus-replay-env:0.1.0-old")})
    said = io.StringIO()
    assert image.build_image(engine, "litmus-replay-env:0.1.0-new", "registry", said) == "litmus-replay-env:0.1.0-new"
    assert "older env images left in place: the engine hung up" in said.getvalue()
    assert engine.has_image("litmus-replay-env:0.1.0-old")
