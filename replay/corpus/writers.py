"""Writing a corpus's runs in the formats benchmarks write, so that reading them back exercises the adapters.

- ``native``: JSONL, 100 trajectories a file (``runs/runs-0001.jsonl``).
- ``openai-chat``: one Chat Completions *request body* per run (``runs/<id>.json``): ``model``,
  ``messages`` (assistant ``tool_calls`` with arguments as JSON strings, ``role: tool`` results),
  ``tools``, and ``metadata`` — the API's string-to-string map — carrying ``task``, ``principal``,
  ``ambient_session`` and ``verdict``, which Chat Completions has no field for.
- ``inspect``: inspect_ai ``.eval`` logs (a ZIP of ``header.json`` and ``samples/<id>_epoch_1.json``),
  100 samples a log; each sample's ``metadata`` carries ``task``, ``principal`` and
  ``ambient_session``, and its scorer's value is the verdict.

Every writer is deterministic: no clocks, fixed ZIP timestamps, keys in a fixed order. A writer is
handed one batch of :data:`PER_FILE` runs at a time, with the batch's number, and writes it at once, so
a corpus is written as it is generated; it returns, per run, the trajectory id the format's adapter will
give it and the file it is in.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path
from itertools import islice
from typing import Any, Callable, Iterable, Iterator

from litmus_replay.replay.errors import UnknownName
from litmus_replay.replay.model import RecordedResult, Trajectory, dump_jsonl

from .generator import PlannedRun

PER_FILE = 100
ZIP_TIME = (2025, 1, 1, 0, 0, 0)
SYSTEM_PROMPT = "You are an operations assistant. Use the tools to do what the user asks, acting for {principal}."


@dataclass(frozen=True)
class Placed:
    """Where a run ended up: the trajectory id its adapter reads and the file, relative to the corpus."""

    trajectory_id: str
    file: str


Writer = Callable[[list[PlannedRun], int, Path], dict[str, Placed]]  # (batch, its number from 1, runs dir)


def batches(runs: Iterable[PlannedRun], size: int = PER_FILE) -> Iterator[list[PlannedRun]]:
    """The runs in lists of ``size`` (the last may be shorter), each taken from ``runs`` only when asked for."""
    runs = iter(runs)
    while batch := list(islice(runs, size)):
        yield batch


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _result_text(result: RecordedResult | None) -> str:
    """A recorded result as a tool message's text content."""
    if result is None:
        return ""
    if result.status == "error":
        return f"Error: {result.error}"
    return result.output if isinstance(result.output, str) else _dump(result.output)


def _metadata(trajectory: Trajectory) -> dict[str, str]:
    meta = {"task": trajectory.task or "", "principal": trajectory.principal}
    if trajectory.ambient_session is not None:
        meta["ambient_session"] = trajectory.ambient_session
    return meta


# -- native -----------------------------------------------------------------------------------------


def write_native(batch: list[PlannedRun], number: int, runs_dir: Path) -> dict[str, Placed]:
    name = f"runs-{number:04d}.jsonl"
    dump_jsonl([run.trajectory for run in batch], runs_dir / name)
    return {run.id: Placed(run.id, f"runs/{name}") for run in batch}


# -- openai-chat ------------------------------------------------------------------------------------


def chat_request(run: PlannedRun) -> dict[str, Any]:
    """One run as a Chat Completions request body (the conversation the model was last sent)."""
    trajectory = run.trajectory
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM_PROMPT.format(principal=trajectory.principal)},
        {"role": "user", "content": run.prompt},
    ]
    tools: dict[str, dict[str, Any]] = {}
    for turn in trajectory.turns:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text}
        if turn.calls:
            message["tool_calls"] = [
                {"id": call.id, "type": "function", "function": {"name": call.tool, "arguments": _dump(call.arguments)}}
                for call in turn.calls
            ]
        messages.append(message)
        for call in turn.calls:
            messages.append({"role": "tool", "tool_call_id": call.id, "content": _result_text(call.result)})
            tools.setdefault(call.tool, {"type": "function", "function": {
                "name": call.tool, "parameters": {"type": "object", "properties": {k: {} for k in sorted(call.arguments)}}}})
    verdict = trajectory.original_verdict  # type: ignore[union-attr]
    metadata = {**_metadata(trajectory), "verdict": verdict.label, "verdict_kind": verdict.kind}
    return {"model": run.model, "store": True, "metadata": metadata, "messages": messages,
            "tools": [tools[name] for name in sorted(tools)]}


def write_openai_chat(batch: list[PlannedRun], number: int, runs_dir: Path) -> dict[str, Placed]:
    placed = {}
    for run in batch:
        name = f"{run.id}.json"
        (runs_dir / name).write_text(json.dumps(chat_request(run), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        placed[run.id] = Placed(run.id, f"runs/{name}")  # a plain request body's trajectory is named after its file
    return placed


# -- inspect ----------------------------------------------------------------------------------------

SCORER = "tool_misuse_judge"
INSPECT_TASK = "litmus_corpus/tool_misuse"


def _error_kind(error: str | None) -> str:
    """inspect's ToolCallError type for a recorded error."""
    code = (error or "").split(":", 1)[0]
    return {"403": "permission", "EACCES": "permission", "EPERM": "permission", "404": "file_not_found",
            "ENOENT": "file_not_found", "EISDIR": "is_a_directory", "timeout": "timeout"}.get(code, "unknown")


def inspect_sample(run: PlannedRun) -> dict[str, Any]:
    """One run as an inspect_ai sample."""
    trajectory = run.trajectory
    messages: list[dict[str, Any]] = [{"role": "user", "content": run.prompt, "source": "input"}]
    for turn in trajectory.turns:
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or "", "source": "generate"}
        if turn.calls:
            message["tool_calls"] = [
                {"id": call.id, "function": call.tool, "arguments": call.arguments, "type": "function"} for call in turn.calls
            ]
        messages.append(message)
        for call in turn.calls:
            tool: dict[str, Any] = {"role": "tool", "content": _result_text(call.result), "tool_call_id": call.id, "function": call.tool}
            if call.result is not None and call.result.status == "error":
                error = call.result.error or ""
                tool["content"] = ""
                tool["error"] = {"type": _error_kind(error), "message": error}
            messages.append(tool)
    verdict = trajectory.original_verdict.label  # type: ignore[union-attr]
    return {
        "id": run.id,
        "epoch": 1,
        "input": run.prompt,
        "target": "",
        "messages": messages,
        "output": {"model": run.model, "choices": [{"message": messages[-1], "stop_reason": "stop"}], "completion": messages[-1]["content"]},
        "scores": {SCORER: {"value": verdict, "explanation": f"proposal-time judge: {verdict}",
                            "metadata": {"verdict_kind": "proposal_time"}}},
        "metadata": _metadata(trajectory),
        "store": {},
    }


def _eval_id(chunk: list[PlannedRun]) -> str:
    """An id for one log, derived from its runs (whose call ids come from the seed): no clock, no randomness."""
    calls = [call.id for run in chunk for _, call in run.trajectory.calls()]
    return hashlib.sha256(_dump(calls).encode()).hexdigest()[:22]


def _header(chunk: list[PlannedRun]) -> dict[str, Any]:
    run_id = _eval_id(chunk)
    return {
        "version": 2,
        "status": "success",
        "eval": {
            "run_id": run_id,
            "created": "2025-01-01T00:00:00+00:00",
            "task": INSPECT_TASK,
            "task_id": run_id[::-1],
            "task_version": 0,
            "dataset": {"name": "litmus_corpus", "samples": len(chunk), "sample_ids": [run.id for run in chunk]},
            "model": f"openai/{chunk[0].model}",
            "config": {},
            "scorers": [{"name": SCORER, "options": {}, "metrics": [], "metadata": {}}],
        },
        "plan": {"name": "plan", "steps": [{"solver": "use_tools", "params": {}}, {"solver": "generate", "params": {}}], "config": {}},
        "results": {"total_samples": len(chunk), "completed_samples": len(chunk), "scores": []},
        "stats": {"started_at": "2025-01-01T00:00:00+00:00", "completed_at": "2025-01-01T00:00:00+00:00", "model_usage": {}},
    }


def _zip_member(archive: zipfile.ZipFile, name: str, value: Any) -> None:
    info = zipfile.ZipInfo(name, date_time=ZIP_TIME)
    info.compress_type = zipfile.ZIP_DEFLATED
    info.external_attr = 0o644 << 16
    archive.writestr(info, _dump(value))


def write_inspect(batch: list[PlannedRun], number: int, runs_dir: Path) -> dict[str, Placed]:
    name = f"corpus-{number:04d}.eval"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        _zip_member(archive, "header.json", _header(batch))
        for run in batch:
            _zip_member(archive, f"samples/{run.id}_epoch_1.json", inspect_sample(run))
    (runs_dir / name).write_bytes(buffer.getvalue())
    return {run.id: Placed(f"{run.id}_epoch_1", f"runs/{name}") for run in batch}  # inspect's sample naming


WRITERS: dict[str, Writer] = {"native": write_native, "openai-chat": write_openai_chat, "inspect": write_inspect}


def get_writer(name: str) -> Writer:
    """The writer for a format; raises :class:`UnknownName` listing the formats a corpus can be written in."""
    if name not in WRITERS:
        raise UnknownName("corpus format", name, list(WRITERS))
    return WRITERS[name]
