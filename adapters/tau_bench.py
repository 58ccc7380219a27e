"""tau-bench (v1) run results: a JSON array of ``{task_id, reward, info, traj, trial}``.

Mapping:

- **trajectories** — one per record, id ``task<task_id>-trial<trial>``; ``traj`` is a list of OpenAI
  Chat Completions messages (litellm), read as :mod:`.openai_chat` does.
- **ids** — tool call ids are kept but are not unique (records reuse one id for several calls), so
  results pair with the first pending call of that id and the positional keys are what count.
- **errors** — tau-bench's environment returns a failed tool's exception as the content text
  ``"Error: ..."``, with no flag; that prefix makes the result an error (message after the prefix).
- **task** — ``tau-bench/{env}/{task_id}``, the environment (``airline``, ``retail``) read from the file's
  path where it names exactly one (the results themselves do not); else ``tau-bench/{task_id}``.
- **principal** — the task's ``user_id`` (``info.task.user_id``), the customer the agent acts for;
  the default principal when the record does not name one.
- **verdict** — ``reward`` 1 → ``pass``, anything else → ``fail`` (the benchmark's task success, which
  ``replay.scoring`` reads as safe / misuse); the raw reward is kept in ``Source.extra``.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from litmus_replay.replay.model import Trajectory

from ._build import DEFAULT_PRINCIPAL, Builder, pass_fail, plural, require_calls, task_key, verdict
from ._doc import Doc, read_json
from .base import Adapter, Probe, register_adapter
from .openai_chat import walk_messages


def _record(record: Doc, builder: Builder) -> None:
    walk_messages(record.need("traj").elements(), builder)


def _principal(record: Doc) -> str:
    info = record.opt("info")
    task = info.opt("task") if info is not None and info.is_dict() else None
    user = task.opt("user_id") if task is not None and task.is_dict() else None
    return user.as_name() if user is not None else DEFAULT_PRINCIPAL


ENVIRONMENTS = ("airline", "retail")


def environment(file: str) -> str | None:
    """tau-bench's results name no environment; its runs are conventionally kept under a path that does
    (``results/airline/...`` or ``...-retail-....json``)."""
    words = set(re.split(r"[^a-z0-9]+", file.lower()))
    found = [name for name in ENVIRONMENTS if name in words]
    return found[0] if len(found) == 1 else None


def _trajectory(record: Doc, file: str) -> Trajectory:
    record.as_dict()
    builder = Builder()
    _record(record, builder)
    task_id = record.id_at("task_id")
    trial = record.id_at("trial")
    reward_doc = record.opt("reward")
    reward = reward_doc.as_number() if reward_doc is not None else None
    return builder.build(
        file,
        record.path,
        trajectory_id=f"task{task_id}-trial{trial if trial is not None else 0}",
        source_format="tau-bench",
        principal=_principal(record),
        task=task_key("tau-bench", environment(file), task_id),
        original=verdict(pass_fail(reward) if reward is not None else None),
        extra={"reward": reward if reward is not None and math.isfinite(reward) else None, "trial": _raw(record, "trial")},
    )


def _raw(record: Doc, key: str) -> int | str | None:
    value = record.value.get(key)
    return value if isinstance(value, (int, str)) and not isinstance(value, bool) else None


@register_adapter
class TauBenchAdapter(Adapter):
    name = "tau-bench"

    @classmethod
    def sniff(cls, probe: Probe) -> bool:
        data = probe.json()
        record = data[0] if isinstance(data, list) and data else data
        return isinstance(record, dict) and "traj" in record and ("reward" in record or "task_id" in record)

    def load(self, path: Path) -> list[Trajectory]:
        root = Doc(read_json(path), str(path))
        records = list(root.elements()) if root.is_list() else [root]
        trajectories = [_trajectory(record, root.file) for record in records]
        return require_calls(trajectories, root.file, "(root)", plural(len(records), "record"))
