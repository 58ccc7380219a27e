"""tau2-bench results: a Results file ``{timestamp, info, tasks, simulations}``, the directory layout tau2
writes today (``results.json`` beside ``simulations/<simulation id>.json``), or one ``SimulationRun``.

Mapping:

- **trajectories** — one per simulation, id = the simulation id, task = ``tau2-bench/{domain}/{task_id}``
  (the domain from ``info.environment_info.domain_name``; a lone SimulationRun names none, so its key is
  ``tau2-bench/{task_id}``), run id = the Results ``timestamp``.
- **turns** — each assistant message is a turn; a user message that calls tools (tau2's dual-control
  domains let the simulated user act on their own device) is a turn of its own, without text.
- **calls** — ``tool_calls[]`` are ``{id, name, arguments (object), requestor}``; ``at`` is the
  message's timestamp.
- **principal** — the agent's calls keep the trajectory's principal; a call whose ``requestor`` is
  ``user`` carries ``principal: "user"``, so the replay acts as the user for it.
- **results** — ``role: tool`` messages carry the call id as ``id`` and an ``error`` flag; ``error: true``
  makes the result an error (its message is the content after tau2's ``"Error: "`` prefix). Multi-tool
  messages (``tool_messages``) are read one by one.
- **cut short** — a ``termination_reason`` other than ``user_stop`` or ``agent_stop`` (``max_steps``,
  ``too_many_errors``, an agent's or user's error) marks the run ``incomplete``, with no verdict: tau2
  gives such a run reward 0 without evaluating it (the reward stays in ``Source.extra``).
- **verdict** — ``reward_info.reward`` 1 → ``pass``, else ``fail``; a ``NaN`` reward (tau2 writes one
  when it could not grade the run) is the label ``NaN``, never a fail. The reward, its basis and the
  termination reason are kept in ``Source.extra``.
- **the conversation around each call** — the text of the user's last message since the agent last spoke
  to the user (an assistant message with text) is kept per call, by call key, in
  ``Source.extra["user_message_before"]`` (a call with none is absent): what a confirmation gate reads.
- **solo runs** — a run made with tau2's solo agent (``info.agent_info.implementation`` ``llm_agent_solo``, the
  agent alone with the user's tools too) has ``Source.extra["solo_mode"]: true``.
- **recorded checks** — the components of ``reward_info`` are kept compactly in
  ``Source.extra["reward_checks"]``: ``db_match``, ``env_assertions`` and ``action_checks`` (each a list of
  ``[name, met]``), ``communicate_checks`` and ``nl_assertions`` (lists of booleans), ``reward_breakdown``.
- **directory layout** — a ``results.json`` whose ``simulations`` are absent or empty reads the
  ``simulations/*.json`` beside it (in file-name order); each trajectory's source is its simulation file,
  and a simulation file read on its own takes its run id and domain from that ``results.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from litmus_replay.replay.model import Trajectory

from ._build import Builder, error, iso_seconds, ok, plural, require_calls, reward_label, reward_value, task_key, text_of, verdict
from ._doc import Doc, read_json
from .base import Adapter, Probe, register_adapter

USER = "user"
_PREFIX = "Error:"
_RESULTS = "results.json"
_SIMULATIONS = "simulations"


def _walk(messages: Doc, builder: Builder) -> dict[str, str]:
    """Read the messages into ``builder``; returns, by call key, the user's last message before each call
    since the agent last spoke to the user."""
    said: dict[str, str] = {}
    user_text: str | None = None
    for message in messages.elements():
        role = message.need("role").as_str()
        if role in ("assistant", USER):
            for key in _caller(message, role, builder):
                if user_text is not None:
                    said[key] = user_text
            text = text_of(message.opt("content"))
            if role == USER and text and text.strip():
                user_text = text
            elif role == "assistant" and text and text.strip():
                user_text = None  # the agent spoke: what the user said before answered something else
        elif role == "tool":
            for tool_message in _tool_messages(message):
                _result(tool_message, builder)
    return said


def _caller(message: Doc, role: str, builder: Builder) -> list[str]:
    calls = message.opt("tool_calls")
    if role == USER and (calls is None or not calls.as_list()):
        return []
    builder.turn(text_of(message.opt("content")) if role == "assistant" else None)
    at = iso_seconds(message.value.get("timestamp"))
    keys = []
    for call in calls.elements() if calls is not None else ():
        requestor = call.str_at("requestor") or role
        keys.append(builder.call(
            call.need("name").as_name(),
            call.opt("arguments"),
            call.id_at("id"),
            at=at,
            principal=USER if requestor == USER else None,
        ))
    return keys


def _tool_messages(message: Doc) -> list[Doc]:
    nested = message.opt("tool_messages")
    return list(nested.elements()) if nested is not None else [message]


def _result(message: Doc, builder: Builder) -> None:
    text = text_of(message.opt("content"))
    if message.bool_at("error"):
        detail = text[len(_PREFIX) :].strip() if text and text.startswith(_PREFIX) else text
        result = error(detail, text)
    else:
        result = ok(text)
    builder.result(message.id_at("id"), result)


def _reward(simulation: Doc) -> tuple[float | None, dict[str, Any]]:
    info = simulation.opt("reward_info")
    if info is None:
        return None, {}
    reward_doc = info.opt("reward")
    reward = reward_doc.as_number() if reward_doc is not None else None
    basis = info.value.get("reward_basis") if info.is_dict() else None
    extra: dict[str, Any] = {"reward": reward_value(reward)}
    if isinstance(basis, list) and all(isinstance(b, str) for b in basis):
        extra["reward_basis"] = basis
    if info.is_dict():
        extra["reward_checks"] = _checks(info.value)
    return reward, extra


def _checks(info: dict[str, Any]) -> dict[str, Any]:
    """The components of a recorded ``reward_info``, compactly (see the module docstring)."""
    def named(items: Any, key: str, name: str, met: str) -> list[list[Any]] | None:
        if not isinstance(items, list):
            return None
        out = []
        for item in items:
            inner = item.get(key) if isinstance(item, dict) else None
            label = inner.get(name) if isinstance(inner, dict) else None
            out.append([label if isinstance(label, str) else None, item.get(met) if isinstance(item, dict) else None])
        return out

    def flags(items: Any, met: str) -> list[Any] | None:
        return [item.get(met) if isinstance(item, dict) else None for item in items] if isinstance(items, list) else None

    db = info.get("db_check")
    breakdown = info.get("reward_breakdown")
    return {
        "db_match": db.get("db_match") if isinstance(db, dict) else None,
        "env_assertions": named(info.get("env_assertions"), "env_assertion", "func_name", "met"),
        "action_checks": named(info.get("action_checks"), "action", "action_id", "action_match"),
        "communicate_checks": flags(info.get("communicate_checks"), "met"),
        "nl_assertions": flags(info.get("nl_assertions"), "met"),
        "reward_breakdown": {str(k): v for k, v in breakdown.items() if isinstance(v, (int, float))}
        if isinstance(breakdown, dict) else None,
    }


def _domain(root: Doc) -> str | None:
    """The domain a results file was run on (``info.environment_info.domain_name``)."""
    value = root.value.get("info") if isinstance(root.value, dict) else None
    value = value.get("environment_info") if isinstance(value, dict) else None
    value = value.get("domain_name") if isinstance(value, dict) else None
    return value if isinstance(value, str) and value else None


def _solo(root: Doc) -> bool:
    """Whether a results file was run with tau2's solo agent (``info.agent_info.implementation``)."""
    value = root.value.get("info") if isinstance(root.value, dict) else None
    value = value.get("agent_info") if isinstance(value, dict) else None
    return isinstance(value, dict) and value.get("implementation") == SOLO_AGENT


SOLO_AGENT = "llm_agent_solo"


def _trajectory(simulation: Doc, file: str, run_id: str | None, domain: str | None = None,
                solo: bool = False) -> Trajectory:
    simulation.as_dict()
    builder = Builder()
    said = _walk(simulation.need("messages"), builder)
    reward, extra = _reward(simulation)
    if said:
        extra["user_message_before"] = said
    if solo:
        extra["solo_mode"] = True
    label = reward_label(reward)
    for key in ("termination_reason", "trial"):
        value = simulation.value.get(key)
        if isinstance(value, (str, int)) and not isinstance(value, bool):
            extra[key] = value
    reason = extra.get("termination_reason")
    cut_short = isinstance(reason, str) and reason not in FINISHED
    return builder.build(
        file,
        simulation.path,
        trajectory_id=simulation.id_at("id") or simulation.id_at("task_id") or "simulation",
        source_format="tau2-bench",
        task=task_key("tau2-bench", domain, simulation.id_at("task_id")),
        original=None if cut_short else verdict(label),  # tau2 scores a run cut short 0 without judging it
        run_id=run_id,
        extra=extra,
        incomplete=f"terminated: {reason}" if cut_short else None,
    )


# How a simulation ends when one side closed the conversation; tau2's other reasons (max_steps,
# too_many_errors, agent_error, user_error) cut the run short.
FINISHED = frozenset({"user_stop", "agent_stop"})


@register_adapter
class Tau2BenchAdapter(Adapter):
    name = "tau2-bench"

    @classmethod
    def sniff(cls, probe: Probe) -> bool:
        data = probe.json()
        if not isinstance(data, dict):
            return False
        if "simulations" in data and ("tasks" in data or "info" in data):
            return True
        if {"info", "tasks"} <= set(data) and ("simulation_index" in data or (probe.path.parent / _SIMULATIONS).is_dir()):
            return True
        return {"messages", "task_id"} <= set(data) and ("reward_info" in data or "termination_reason" in data)

    def load(self, path: Path) -> list[Trajectory]:
        root = Doc(read_json(path), str(path))
        simulations = root.opt("simulations") if root.is_dict() else None
        if simulations is not None and simulations.as_list():
            run_id = root.str_at("timestamp")
            domain, solo = _domain(root), _solo(root)
            trajectories = [_trajectory(s, root.file, run_id, domain, solo) for s in simulations.elements()]
            return require_calls(trajectories, root.file, simulations.path, plural(len(trajectories), "simulation"))
        if root.is_dict() and {"info", "tasks"} <= set(root.value):
            return _directory(root, path)
        run_id, domain, solo = _results_context(path)
        return require_calls([_trajectory(root, root.file, run_id, domain, solo)], root.file, "messages")


def _directory(root: Doc, path: Path) -> list[Trajectory]:
    """The simulations of tau2's directory layout, read from the files beside ``results.json``."""
    folder = path.parent / _SIMULATIONS
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        root.fail(f"holds no simulations, and there is no {_SIMULATIONS}/*.json beside it to read them from", "simulations")
    run_id, domain, solo = root.str_at("timestamp"), _domain(root), _solo(root)
    trajectories = []
    for file in files:
        simulation = Doc(read_json(file), str(file))
        trajectories.append(_trajectory(simulation, simulation.file, run_id, domain, solo))
    return require_calls(trajectories, root.file, f"{_SIMULATIONS}/", plural(len(trajectories), "simulation"))


def _results_context(path: Path) -> tuple[str | None, str | None, bool]:
    """The run id, domain and solo mode of a simulation file that sits in tau2's directory layout, from the
    ``results.json`` beside its folder (none for a lone SimulationRun)."""
    if path.parent.name != _SIMULATIONS:
        return None, None, False
    results = path.parent.parent / _RESULTS
    try:
        data = json.loads(results.read_text(encoding="utf-8")) if results.is_file() else None
    except (OSError, ValueError, RecursionError):
        return None, None, False
    if not isinstance(data, dict):
        return None, None, False
    stamp = data.get("timestamp")
    root = Doc(data, str(results))
    return (stamp if isinstance(stamp, str) else None), _domain(root), _solo(root)
