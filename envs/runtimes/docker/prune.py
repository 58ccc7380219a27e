"""Removing this project's older env images: every change to ``envs/`` builds an image under a new tag
(:func:`.image.image_tag`), and the old ones would pile up, a few hundred megabytes each.

An env image is known by its label (:data:`IMAGE_LABEL`, which every build sets) and its repository. After
a build, the images of the same repository other than the one just built are removed, unless a container
(running or stopped) was made from them: a run still using an older envs version keeps its image. Only
tags are removed; the engine drops an image with its last tag, and refuses one a container uses.
"""

from __future__ import annotations

from typing import Protocol

IMAGE_LABEL = "litmus-replay.envs-digest"


class Engine(Protocol):
    """What pruning needs from the engine; :class:`.engine.Engine` provides it."""

    def labelled_images(self, label: str) -> list[tuple[str, list[str]]]: ...

    def images_in_use(self) -> set[str]: ...

    def untag(self, reference: str) -> bool: ...


def _repository(tag: str) -> str:
    name, _, version = tag.rpartition(":")
    return name if name and "/" not in version else tag


def prune_images(engine: Engine, keep: str) -> list[str]:
    """Remove the env images of ``keep``'s repository other than ``keep`` that no container uses; return
    the tags removed, sorted."""
    repository = _repository(keep)
    images = engine.labelled_images(IMAGE_LABEL)
    kept = {image_id for image_id, tags in images if keep in tags} | engine.images_in_use()
    removed = []
    for image_id, tags in images:
        if image_id in kept:
            continue
        for tag in tags:
            if _repository(tag) == repository and engine.untag(tag):
                removed.append(tag)
    return sorted(removed)


def describe(removed: list[str], shown: int = 4) -> str:
    """One line saying which older images were removed."""
    names = ", ".join(removed[:shown]) + (f" and {len(removed) - shown} more" if len(removed) > shown else "")
    return f"removed {len(removed)} older env image{'s' if len(removed) != 1 else ''} no container uses: {names}"
