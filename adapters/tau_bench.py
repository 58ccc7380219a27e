"""tau-bench (v1) run results: a JSON array of ``{task_id, reward, info, traj, trial}``.

Mapping:

- **trajectories** — one per record, id ``task<task_id>-trial<trial>``; ``traj`` is a list of OpenAI
  Chat Completions messages (litellm), read as :mod:`.openai_chat` does.
- **ids** — tool call ids are kept but are not unique (records reuse one id for several calls), so
  results pair with the first pending call of that id and the positional keys are what count.
- **errors** — tau-bench's environment returns a failed tool's exception as the content text
  ``"Error: ..."``, with no flag; that prefix makes the result an error (message after the prefix).
- **task** — ``tau-bench/{env}/{task_id}``. The results name no environment (``airline``, ``retail``): it
  is the one the file's absolute path names, where it names exactly one (so it does not depend on the
  working directory); else the one whose tools the file's records use, where they use tools of one only
  (each environment has its own: ``book_reservation``, ``update_reservation_flights``, ... against
  ``exchange_delivered_order_items``, ``get_order_details``, ...; ``get_user_details`` and ``think`` are
  both's); else ``tau-bench/{task_id}``.
- **principal** — the task's ``user_id`` (``info.task.user_id``), the customer the agent acts for;
  the default principal when the record does not name one.
- **verdict** — ``reward`` 1 → ``pass``, anything else → ``fail`` (the benchmark's task success, which
  ``replay.scoring`` reads as safe / misuse); a ``NaN`` reward is the label ``NaN``, never a fail, as in
  :mod:`.tau2_bench`. The raw reward is kept in ``Source.extra``.
- **cut short** — ``info.error`` (the exception tau-bench's ``run.py`` caught, a rate limit say, with an
  empty ``traj``) marks the run ``incomplete``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Iterable

from litmus_replay.replay.model import Trajectory

from ._build import (DEFAULT_PRINCIPAL, Builder, plural, recorded_error, require_calls, reward_label, reward_value,
                     task_key, verdict)
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


# The tools only one environment has (tau_bench/envs/<env>/tools); the rest (calculate, get_user_details,
# think, transfer_to_human_agents) are both environments'.
TOOLS = {
    "airline": frozenset({
        "book_reservation", "cancel_reservation", "get_reservation_details", "list_all_airports",
        "search_direct_flight", "search_onestop_flight", "send_certificate", "update_reservation_baggages",
        "update_reservation_flights", "update_reservation_passengers",
    }),
    "retail": frozenset({
        "cancel_pending_order", "exchange_delivered_order_items", "find_user_id_by_email", "find_user_id_by_name_zip",
        "get_order_details", "get_product_details", "list_all_product_types", "modify_pending_order_address",
        "modify_pending_order_items", "modify_pending_order_payment", "modify_user_address", "modify_user_email",
        "return_delivered_order_items",
    }),
}
ENVIRONMENTS = tuple(TOOLS)


def environment(file: str, records: Iterable[Any] = ()) -> str | None:
    """tau-bench's results name no environment; its runs are conventionally kept under a path that does
    (``results/airline/...`` or ``...-retail-....json``), and each environment's agent has its own tools."""
    words = set(re.split(r"[^a-z0-9]+", os.path.abspath(file).lower()))
    named = [name for name in ENVIRONMENTS if name in words]
    if len(named) == 1:
        return named[0]
    used = tools_used(records)
    found = [name for name, tools in TOOLS.items() if used & tools]
    return found[0] if len(found) == 1 else None


def tools_used(records: Iterable[Any]) -> set[str]:
    """The tool names the records' agents called or their tasks expected (``info.task.actions``)."""
    found: list[Any] = []
    for record in records:
        if not isinstance(record, dict):
            continue
        for message in _list(record.get("traj")):
            for call in _list(message.get("tool_calls") if isinstance(message, dict) else None):
                function = call.get("function") if isinstance(call, dict) else None
                found.append(function.get("name") if isinstance(function, dict) else None)
        info = record.get("info")
        task = info.get("task") if isinstance(info, dict) else None
        for action in _list(task.get("actions") if isinstance(task, dict) else None):
            found.append(action.get("name") if isinstance(action, dict) else None)
    return {name for name in found if isinstance(name, str)}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _trajectory(record: Doc, file: str, env: str | None) -> Trajectory:
    record.as_dict()
    builder = Builder()
    _record(record, builder)
    task_id = record.id_at("task_id")
    trial = record.id_at("trial")
    reward_doc = record.opt("reward")
    reward = reward_doc.as_number() if reward_doc is not None else None
    info = record.value.get("info")
    return builder.build(
        file,
        record.path,
        trajectory_id=f"task{task_id}-trial{trial if trial is not None else 0}",
        source_format="tau-bench",
        principal=_principal(record),
        task=task_key("tau-bench", env, task_id),
        original=verdict(reward_label(reward)),
        extra={"reward": reward_value(reward), "trial": _raw(record, "trial")},
        # run.py records the exception that ended the run
        incomplete=recorded_error(info.get("error") if isinstance(info, dict) else None),
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
        env = environment(root.file, [record.value for record in records])
        trajectories = [_trajectory(record, root.file, env) for record in records]
        return require_calls(trajectories, root.file, "(root)", plural(len(records), "record"))
