"""The project's own JSONL format (see :mod:`litmus_replay.replay.model`)."""

from __future__ import annotations

from pathlib import Path

from litmus_replay.replay.errors import AdapterError, TrajectoryError
from litmus_replay.replay.model import Trajectory, load_jsonl

from .base import Adapter, register_adapter


@register_adapter
class NativeAdapter(Adapter):
    name = "native"

    def load(self, path: Path) -> list[Trajectory]:
        try:
            return load_jsonl(path)
        except TrajectoryError as exc:
            raise AdapterError(exc.file, exc.field, exc.message) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise AdapterError(str(path), None, f"cannot read: {exc}") from None
