"""The project's own JSONL format (see :mod:`litmus_replay.replay.model`)."""

from __future__ import annotations

from pathlib import Path

from litmus_replay.replay.errors import AdapterError, TrajectoryError
from litmus_replay.replay.model import Trajectory, load_jsonl

from ._doc import ROOT, json_refusal, one_line
from .base import Adapter, Probe, register_adapter


@register_adapter
class NativeAdapter(Adapter):
    name = "native"

    @classmethod
    def sniff(cls, probe: Probe) -> bool:
        line = probe.first_line()
        return isinstance(line, dict) and ("format_version" in line or {"principal", "turns"} <= set(line))

    def load(self, path: Path) -> list[Trajectory]:
        try:
            return load_jsonl(path)
        except TrajectoryError as exc:
            # a field path can quote a key from the file: keep the error on one line
            raise AdapterError(exc.file, one_line(exc.field or ROOT), one_line(exc.message)) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise AdapterError(str(path), ROOT, one_line(f"cannot read: {exc}")) from None
        except (ValueError, RecursionError) as exc:  # what json refuses beyond syntax: huge numbers, deep nesting
            raise AdapterError(str(path), ROOT, f"not valid JSON Lines: {json_refusal(exc)}") from None
