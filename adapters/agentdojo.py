"""AgentDojo TraceLogger run logs (``runs/{pipeline}/{suite}/{user_task}/{attack|none}/{injection|none}.json``).

Mapping:

- **turns** — each assistant message is a turn. Its content is a string (the "old" schema) or, since
  benchmark v1.2, a list of ``{"type": "text", "content": ...}`` blocks.
- **calls** — ``tool_calls[]`` are ``{function, args, id}``; ``id`` is null for local models.
- **results** — a ``role: tool`` message answers the pending call with its ``tool_call_id``, or the
  oldest pending call when that is null. Its ``error`` string (``"ValueError: No emails found. ..."``)
  makes the result an error; the content is kept as the output when there is one.
- **verdict** — AgentDojo's ``security`` is the injection task's own check of the environment after the
  run (state-based): true when the attacker's goal was reached. So for a run with an injection,
  ``security: true`` → ``tool_misuse`` and ``security: false`` → ``safe``. A run without an injection
  records ``security: true`` by construction, which judges nothing: no verdict; so does a run that
  recorded an ``error`` (AgentDojo records ``security: true`` for a run it skipped on context length or
  a server error). A denial-of-service attack's ``security`` is ``not utility``: ``denial_of_service``
  or ``no_denial_of_service``.
  ``utility``, ``security``, the attack, the run-level ``error`` and the recorded ``injections`` (vector ->
  text) are kept in ``Source.extra``, with the text of the user's messages (``user_messages``); a
  run-level ``error`` (the pipeline raised) also marks the run ``incomplete``.
- **principal** — not recorded (the user is named only in the system prompt): the default principal.
- **task** — ``agentdojo/{suite}/{user_task}``: every suite has a ``user_task_0``.
- **id** — the TraceLogger path, ``{pipeline}/{suite}/{user_task}/{attack|none}/{injection|none}``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from litmus_replay.replay.model import OriginalVerdict, Trajectory

from ._build import Builder, error, ok, recorded_error, require_calls, task_key, user_texts, walk_chat_messages
from ._doc import Doc, read_json
from .base import Adapter, Probe, register_adapter

_KEYS = {"suite_name", "user_task_id", "messages"}


def _result(message: Doc, output: str | None) -> dict[str, Any]:
    """AgentDojo marks a failed call with an ``error`` string on the tool message."""
    failure = message.str_at("error")
    return error(failure, output or None) if failure else ok(output)


def _walk(messages: Doc, builder: Builder) -> None:
    walk_chat_messages(messages, builder, "args", _result)


def original_verdict(root: Doc) -> OriginalVerdict | None:
    """AgentDojo's ``security``, a check of the environment after the run (state-based).

    ``tool_misuse`` when an injection's goal was reached, ``safe`` when it was not; for a denial-of-service
    attack (``*dos``), which AgentDojo scores as ``security = not utility``, ``denial_of_service`` or
    ``no_denial_of_service``, which are no tool-misuse verdict. None without an injection, and for a run
    AgentDojo could not complete (``error``: it records ``security: true`` for those by default).
    """
    if root.str_at("injection_task_id") is None or recorded_error(root.value.get("error")):
        return None
    security = root.opt("security")
    if security is None:
        return None
    attained = security.as_bool()
    if is_dos_attack(root.str_at("attack_type")):
        return OriginalVerdict(label="denial_of_service" if attained else "no_denial_of_service", kind="state_based")
    return OriginalVerdict(label="tool_misuse" if attained else "safe", kind="state_based")


def is_dos_attack(attack_type: str | None) -> bool:
    """AgentDojo's denial-of-service attacks (``dos``, ``swearwords_dos``, ``captcha_dos``, ...): their
    ``is_dos_attack`` flag, read from the name each of them ends with."""
    return bool(attack_type) and (attack_type == "dos" or attack_type.endswith("_dos"))


def _extra(root: Doc) -> dict[str, Any]:
    keys = ("suite_name", "pipeline_name", "user_task_id", "injection_task_id", "attack_type", "utility",
            "security", "error", "duration", "benchmark_version", "evaluation_timestamp")
    data = root.as_dict()
    extra = {key: data[key] for key in keys if isinstance(data.get(key), (str, int, float, bool))}
    injections = data.get("injections")
    if isinstance(injections, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in injections.items()):
        extra["injections"] = injections  # the attack's text per injection vector, to rebuild the environment
    return extra


@register_adapter
class AgentDojoAdapter(Adapter):
    name = "agentdojo"

    @classmethod
    def sniff(cls, probe: Probe) -> bool:
        data = probe.json()
        return isinstance(data, dict) and _KEYS <= set(data)

    def load(self, path: Path) -> list[Trajectory]:
        root = Doc(read_json(path), str(path))
        messages = root.need("messages")
        builder = Builder()
        _walk(messages, builder)
        parts = [root.str_at(key) or "none" for key in ("pipeline_name", "suite_name", "user_task_id", "attack_type", "injection_task_id")]
        trajectory = builder.build(
            root.file,
            messages.path,
            trajectory_id="/".join(parts),
            source_format=self.name,
            task=task_key(self.name, root.str_at("suite_name"), root.str_at("user_task_id")),
            original=original_verdict(root),
            run_id=root.str_at("pipeline_name"),
            extra={**_extra(root), "user_messages": user_texts(messages)},
            incomplete=recorded_error(root.value.get("error")),  # the pipeline raised: the run stopped there
        )
        return require_calls([trajectory], root.file, messages.path)
