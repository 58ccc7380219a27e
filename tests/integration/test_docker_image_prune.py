"""Older env images go after a build, on a real engine: never the one just built, one a container was made
from, an unlabelled one or another repository's; and a runtime whose image was removed under it (another
version's build pruned it) builds it again instead of failing its worlds.

Every image here is in a repository of the test's own, so the engine's real env images are left alone."""

from __future__ import annotations

import io
import tarfile
import uuid
from pathlib import Path

import pytest

from litmus_replay.envs.runtimes.docker import LABEL, image, prune


@pytest.fixture(scope="module")
def docker_runtime(runtime_opener):
    runtime = runtime_opener("docker", pool_size=0)
    yield runtime
    runtime.close()


@pytest.fixture()
def repository(docker_runtime):
    """A repository name of this test's own; every image tagged in it is removed afterwards."""
    name = f"litmus-replay-env-test-{uuid.uuid4().hex[:10]}"
    yield name
    client = docker_runtime.engine.client
    for found in client.images.list(name=name):
        for tag in found.tags:
            if tag.startswith(name + ":"):
                client.images.remove(tag, force=True)


def _import(engine, tmp_path: Path, tag: str, labelled: bool = True) -> str:
    """A one-file image (its own content, so its own id) under ``tag``."""
    path = tmp_path / f"{uuid.uuid4().hex}.tar"
    data = tag.encode()
    with tarfile.open(path, "w") as archive:
        info = tarfile.TarInfo("marker")
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    engine.import_tarball(path, tag, [f'LABEL {prune.IMAGE_LABEL}="{tag.rsplit(":", 1)[-1]}"'] if labelled else [])
    return engine.client.images.get(tag).id


def test_pruning_keeps_the_new_the_used_the_unlabelled_and_other_repositories(docker_runtime, repository, tmp_path):
    engine = docker_runtime.engine
    for tag in ("old", "used", "new"):
        _import(engine, tmp_path, f"{repository}:{tag}")
    _import(engine, tmp_path, f"{repository}:plain", labelled=False)
    _import(engine, tmp_path, f"{repository}-other:old")
    container = engine.client.containers.create(f"{repository}:used", command=["/marker"], labels={LABEL: "1"})
    try:
        removed = prune.prune_images(engine, f"{repository}:new")
        left = {tag for found in engine.client.images.list() for tag in found.tags if tag.startswith(repository)}
    finally:
        container.remove(force=True)
        engine.untag(f"{repository}-other:old")
    assert removed == [f"{repository}:old"]
    assert left == {f"{repository}:used", f"{repository}:new", f"{repository}:plain", f"{repository}-other:old"}


def test_a_runtime_whose_image_was_removed_builds_it_again(docker_runtime, repository, monkeypatch):
    engine = docker_runtime.engine
    engine.client.images.get(docker_runtime.image).tag(repository, "current")
    own = f"{repository}:current"
    monkeypatch.setattr(docker_runtime, "image", own)  # as if this runtime had built it for its envs code
    assert engine.untag(own)  # what another version's build does to an older image nobody uses
    said = io.StringIO()
    progress = image._progress
    monkeypatch.setattr(image, "_progress", lambda stream: progress(said))
    with docker_runtime.open_world({"principals": ["alice"], "files": {"tree": {"/workspace/a.txt": "hi"}}}, "real") as world:
        answer = world.call({"tool": "read_file", "params": {"path": "/workspace/a.txt"}, "principal": "alice"})
    assert answer["output"] == "hi"
    assert engine.has_image(own)
    assert f"the env image {own} is missing" in said.getvalue()
