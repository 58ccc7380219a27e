"""inspect_ai eval logs: ``.eval`` (a ZIP of ``header.json`` and ``samples/*.json``) and ``.json``.

Named ``inspect_log`` so that nothing can mistake it for the standard library's ``inspect``.

Reading: with ``inspect_ai`` importable, its own ``read_eval_log`` reads the file (it knows every log
version); otherwise, and whenever asked, this module's reader does. Both hand the same sample
dictionaries to one mapping, so the project never depends on ``inspect_ai``.

Mapping:

- **trajectories** — one per sample and epoch, id ``<sample id>_epoch_<epoch>`` (inspect's own sample
  file name); task = the sample's ``metadata.task`` if it is a non-empty string (one log may hold the
  samples of several tasks, each with its own world), else ``eval.task``; run id = ``eval.run_id``.
- **turns** — each assistant message is a turn (content a string or a list of content blocks), its
  ``tool_calls[]`` ``{id, function, arguments (object)}`` the calls.
- **results** — a ``role: tool`` message answers the pending call with its ``tool_call_id``; its
  ``error`` object ``{type, message}`` makes the result an error, ``"<type>: <message>"``.
- **attachments** — ``attachment://<hash>`` strings (and the older ``tc://``) are resolved from the
  sample's ``attachments``. Message pools only deduplicate the events' model inputs; ``messages``
  already holds the whole conversation, so pools need no resolving here.
- **verdict** — the first scorer's value, as the benchmark wrote it (``C``/``I``, a number, a string;
  an object as compact JSON): inspect hosts every kind of benchmark, so values are not reinterpreted
  (a scorer that writes ``tool_misuse`` or ``safe`` is read by ``replay.scoring`` as such). Every
  scorer's value is kept in ``Source.extra["scores"]``.
- **principal** and **ambient session** — not recorded by inspect: the sample's ``metadata.principal``
  and ``metadata.ambient_session`` when they are non-empty strings, else the default principal and none.
"""

from __future__ import annotations

import io
import json
import zipfile
import zlib
from pathlib import Path
from typing import Any

from litmus_replay.replay.errors import AdapterError
from litmus_replay.replay.model import OriginalVerdict, Trajectory

from ._build import DEFAULT_PRINCIPAL, Builder, error, ok, plural, require_calls, walk_chat_messages
from ._doc import ROOT, Doc, decode_text, one_line, parse_json, read_bytes
from .base import Adapter, Probe, register_adapter

ATTACHMENT = "attachment://"
_LEGACY_ATTACHMENT = "tc://"
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, OSError, ValueError)


def inspect_ai_available() -> bool:
    try:
        import inspect_ai.log  # noqa: F401
    except Exception:  # noqa: BLE001 - absent, or present but broken: use our own reader
        return False
    return True


# -- reading ----------------------------------------------------------------------------------------


def _read_own(path: Path) -> tuple[Doc, list[Doc]]:
    """The eval spec and the samples, from a ``.eval`` archive or a ``.json`` log."""
    data = read_bytes(path)
    if data[:4] == b"PK\x03\x04" or path.suffix.lower() == ".eval":
        return _read_archive(path, data)
    root = Doc(parse_json(decode_text(data, str(path)), str(path)), str(path))
    samples = root.opt("samples")
    return root.need("eval"), list(samples.elements()) if samples is not None else []


def _read_archive(path: Path, data: bytes) -> tuple[Doc, list[Doc]]:
    file = str(path)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        names = archive.namelist()
    except _ZIP_ERRORS as exc:
        raise AdapterError(file, "zip", one_line(f"not a readable .eval archive: {exc}")) from None
    with archive:
        head_name = next((n for n in ("header.json", "_journal/start.json") if n in names), None)
        head = _member(archive, file, head_name) if head_name else Doc({}, file, "header.json:")
        samples = [_member(archive, file, n) for n in names if n.startswith("samples/") and n.endswith(".json")]
    return head.need("eval") if head_name else Doc({}, file, "header.json: eval"), samples


def _member(archive: zipfile.ZipFile, file: str, name: str) -> Doc:
    try:
        raw = archive.read(name)
    except _ZIP_ERRORS as exc:
        raise AdapterError(file, name, one_line(f"cannot read this archive member: {exc}")) from None
    return Doc(parse_json(decode_text(raw, file), file, name), file, f"{name}:")


def _read_with_inspect_ai(path: Path) -> tuple[Doc, list[Doc]]:
    """inspect_ai's own reader, its models dumped back to the dictionaries our mapping reads."""
    from inspect_ai.log import read_eval_log

    file = str(path)
    try:
        log = read_eval_log(file, resolve_attachments=True)
        spec = log.eval.model_dump(mode="json", exclude_none=True)
        samples = [s.model_dump(mode="json", exclude_none=True) for s in (log.samples or [])]
    except Exception as exc:  # noqa: BLE001 - whatever inspect_ai raises, the file is unreadable
        raise AdapterError(file, ROOT, one_line(f"inspect_ai cannot read this log: {type(exc).__name__}: {exc}")) from None
    return Doc(spec, file, "eval"), [Doc(s, file, f"samples[{i}]") for i, s in enumerate(samples)]


def resolve_attachments(value: Any, attachments: dict[str, Any]) -> Any:
    """Replace ``attachment://<hash>`` strings by the attachment they name (unknown ones stay)."""
    if isinstance(value, str):
        for prefix in (ATTACHMENT, _LEGACY_ATTACHMENT):
            if value.startswith(prefix):
                found = attachments.get(value[len(prefix) :])
                return found if isinstance(found, str) else value
        return value
    if isinstance(value, list):
        return [resolve_attachments(v, attachments) for v in value]
    if isinstance(value, dict):
        return {k: resolve_attachments(v, attachments) for k, v in value.items()}
    return value


# -- mapping ----------------------------------------------------------------------------------------


def _result(message: Doc, output: str | None) -> dict[str, Any]:
    """inspect_ai marks a failed call with an ``error`` object ``{type, message}`` on the tool message."""
    failure = message.opt("error")
    if failure is None:
        return ok(output)
    kind = failure.str_at("type") or "error"
    detail = failure.str_at("message")
    return error(f"{kind}: {detail}" if detail else kind, output)


def _walk(messages: Doc, builder: Builder) -> None:
    walk_chat_messages(messages, builder, "arguments", _result)


def score_label(value: Any) -> str | None:
    """A score value as the benchmark wrote it, as text."""
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _scores(sample: Doc) -> dict[str, Any]:
    scores = sample.opt("scores")
    if scores is not None:
        return {name: score.need("value").value for name, score in scores.entries()}
    legacy = sample.opt("score")
    return {"score": legacy.need("value").value} if legacy is not None else {}


def _trajectory(sample: Doc, spec: Doc) -> Trajectory:
    sample.as_dict()
    attachments = sample.value.get("attachments")
    if isinstance(attachments, dict) and attachments:
        sample = Doc(resolve_attachments(sample.value, attachments), sample.file, sample.path)
    builder = Builder()
    messages = sample.opt("messages")
    if messages is not None:
        _walk(messages, builder)
    scores = _scores(sample)
    label = score_label(next(iter(scores.values()), None))
    epoch = sample.opt("epoch")
    extra: dict[str, Any] = {"scores": scores}
    failure = sample.opt("error")
    if failure is not None and failure.is_dict() and isinstance(failure.value.get("message"), str):
        extra["error"] = failure.value["message"]
    metadata = sample.value.get("metadata")
    meta = metadata if isinstance(metadata, dict) else {}
    trajectory = builder.build(
        sample.file,
        sample.path,
        trajectory_id=f"{sample.need('id').as_id()}_epoch_{epoch.as_id() if epoch is not None else 1}",
        source_format="inspect",
        principal=_meta_text(meta, "principal") or DEFAULT_PRINCIPAL,
        task=_meta_text(meta, "task") or spec.str_at("task"),
        original=OriginalVerdict(label=label) if label else None,
        run_id=spec.str_at("run_id"),
        extra=extra,
    )
    session = _meta_text(meta, "ambient_session")
    return trajectory.model_copy(update={"ambient_session": session}) if session else trajectory


def _meta_text(metadata: dict[str, Any], key: str) -> str | None:
    value = metadata.get(key)
    return value if isinstance(value, str) and value.strip() else None


@register_adapter
class InspectAdapter(Adapter):
    """``use_inspect_ai``: True/False forces a reader; None uses inspect_ai's when it is importable."""

    name = "inspect"

    def __init__(self, use_inspect_ai: bool | None = None):
        self.use_inspect_ai = use_inspect_ai

    @classmethod
    def sniff(cls, probe: Probe) -> bool:
        if probe.is_zip():
            names = probe.zip_names()
            known = "header.json" in names or "_journal/start.json" in names or any(n.startswith("samples/") for n in names)
            return known or probe.suffix == ".eval"  # a damaged archive still gets the inspect reader's diagnosis
        data = probe.json()
        return isinstance(data, dict) and isinstance(data.get("eval"), dict) and ("samples" in data or "version" in data)

    def load(self, path: Path) -> list[Trajectory]:
        use = inspect_ai_available() if self.use_inspect_ai is None else self.use_inspect_ai
        try:
            spec, samples = _read_with_inspect_ai(path) if use else _read_own(path)
            spec.as_dict()
            trajectories = [_trajectory(sample, spec) for sample in samples]
        except RecursionError:
            raise AdapterError(str(path), ROOT, "nested too deeply to read") from None
        unanswered = sum(t.source.extra.get("unpaired_results", 0) for t in trajectories)
        detail = plural(len(samples), "sample") + (f"; {plural(unanswered, 'tool result')} without a proposing tool call" if unanswered else "")
        return require_calls(trajectories, str(path), "samples[].messages", detail)
