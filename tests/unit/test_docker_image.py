"""The env image's recipe, without an engine: apt's configured sources are read as apt reads them (the
offline build never names a mirror of its own), and the tag follows the envs code."""

from __future__ import annotations

from pathlib import Path

import pytest

from litmus_replay.envs import RuntimeUnavailable
from litmus_replay.envs.runtimes.docker import image


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
