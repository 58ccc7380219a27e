"""inspect_ai eval logs: ``.eval`` (a ZIP of ``header.json`` and ``samples/*.json``) and ``.json``.

Named ``inspect_log`` so that nothing can mistake it for the standard library's ``inspect``.

Reading: this module's reader reads a log of a version it knows (:data:`KNOWN_LOG_VERSIONS`); a log of
another version, or one it cannot read, goes to inspect_ai's own ``read_eval_log`` where ``inspect_ai``
is importable (it knows every log version). Both hand the same sample dictionaries to one mapping, so
the project never depends on ``inspect_ai``; this reader comes first because it is nine times cheaper
(importing inspect_ai and validating its models cost 4.5 s of CPU on the shipped corpus of 1,200 runs,
against 0.5 s), and the tests hold the two readers to the same trajectories. Archive members compressed
with zstd (ZIP method 93, inspect_ai's default since 0.3.206) are read with ``zstandard``. A file whose
values inspect_ai's models refuse goes to this module's reader, which either reads it (inspect_ai's
models are stricter about nulls than the logs some versions wrote) or says which field is wrong (an
argument of the wrong type) rather than repeating pydantic's report; a file inspect_ai cannot open for
another reason is diagnosed by this module's reader (a truncated archive, a damaged member), and where
that reader sees nothing wrong, inspect_ai's reason is the error.

Order: samples come out sorted by epoch, then by sample id (numbers before text, numbers in numeric
order), whichever reader is used and whatever order the archive stores them in; this is the order
inspect_ai's own reader gives.

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
- **verdict** — the first scorer's value. A number (or a boolean) is graded: ``pass`` when it is at
  least the pass mark, else ``fail``; the pass mark is 1.0 by default (inspect's ``C`` is worth 1.0)
  and is set by ``InspectAdapter(pass_mark=...)`` or the ``LITMUS_INSPECT_PASS_MARK`` environment
  variable. Any other value is kept as the benchmark wrote it (``C``/``I``, a string; an object as
  compact JSON): inspect hosts every kind of benchmark, so labels are not reinterpreted (a scorer that
  writes ``tool_misuse`` or ``safe`` is read by ``replay.scoring`` as such). Every scorer's raw value is
  kept in ``Source.extra["scores"]``.
- **principal** and **ambient session** — not recorded by inspect: the sample's ``metadata.principal``
  and ``metadata.ambient_session`` when they are non-empty strings, else the default principal and none.
"""

from __future__ import annotations

import io
import json
import math
import os
import zipfile
import zlib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from litmus_replay.replay import limits
from litmus_replay.replay.errors import AdapterError
from litmus_replay.replay.model import VERDICT_KINDS, OriginalVerdict, Trajectory

from ._build import DEFAULT_PRINCIPAL, Builder, error, ok, plural, recorded_error, require_calls, walk_chat_messages
from ._doc import ROOT, Doc, decode_text, one_line, parse_json, read_bytes
from ._zip import MemberError, MemberTooLarge, read_member
from .base import Adapter, Probe, register_adapter

ATTACHMENT = "attachment://"
_LEGACY_ATTACHMENT = "tc://"
PASS_MARK_VARIABLE = "LITMUS_INSPECT_PASS_MARK"
DEFAULT_PASS_MARK = 1.0
# The log versions (``version`` at a log's root, or in an archive's header) this module's reader is held
# to inspect_ai's own on, by the tests: 2 (inspect_ai 0.3.285 writes it) and 3 (the shipped sample of a
# later one). A log of version 1 or of a version to come goes to inspect_ai's reader where it is installed.
KNOWN_LOG_VERSIONS = frozenset({2, 3})
_ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, OSError, ValueError)


def inspect_ai_available() -> bool:
    try:
        import inspect_ai.log  # noqa: F401
    except Exception:  # noqa: BLE001 - absent, or present but broken: use our own reader
        return False
    return True


# -- reading ----------------------------------------------------------------------------------------


def _read_own(path: Path) -> tuple[Doc, list[Doc], Any]:
    """The eval spec, the samples and the log's version, from a ``.eval`` archive or a ``.json`` log."""
    data = read_bytes(path)
    if data[:4] == b"PK\x03\x04" or path.suffix.lower() == ".eval":
        return _read_archive(path, data)
    root = Doc(parse_json(decode_text(data, str(path)), str(path)), str(path))
    samples = root.opt("samples")
    return root.need("eval"), list(samples.elements()) if samples is not None else [], _version(root)


def _version(root: Doc) -> Any:
    return root.value.get("version") if isinstance(root.value, dict) else None


def _read_archive(path: Path, data: bytes) -> tuple[Doc, list[Doc], Any]:
    file = str(path)
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        names = archive.namelist()
    except _ZIP_ERRORS as exc:
        raise AdapterError(file, "zip", _archive_problem(data, exc)) from None
    decompressed = _Decompressed(file)
    with archive:
        head_name = next((n for n in ("header.json", "_journal/start.json") if n in names), None)
        head = _member(archive, data, decompressed, head_name) if head_name else Doc({}, file, "header.json:")
        samples = [_member(archive, data, decompressed, n) for n in names if n.startswith("samples/") and n.endswith(".json")]
    if not head_name:
        return Doc({}, file, "header.json: eval"), samples, None
    return head.need("eval"), samples, _version(head)


def _archive_problem(data: bytes, exc: BaseException) -> str:
    """What is wrong with bytes ``zipfile`` cannot open, in words."""
    if not data.strip():
        return "an empty file, not an .eval archive"
    if data[:4] == b"PK\x03\x04" and b"PK\x05\x06" not in data[-65557:]:
        return "a truncated .eval archive: it starts as a ZIP archive but its end (the central directory) is missing"
    if data[:4] != b"PK\x03\x04":
        return "not an .eval archive: it does not start as a ZIP archive does"
    return one_line(f"a damaged .eval archive ({exc})")


class _Decompressed:
    """The bytes one archive's members have decompressed to so far, against ``archive_bytes``: each member
    is bounded by ``member_bytes``, and this bounds how many of them a batch process holds at once."""

    def __init__(self, file: str):
        self.file = file
        self.limit = limits.get("archive_bytes")
        self.total = 0

    def room(self) -> int:
        return self.limit - self.total

    def exceeded(self, name: str, size: int) -> limits.LimitExceeded:
        """The refusal naming the member at which the total passed the limit."""
        return limits.LimitExceeded(self.file, name, f"the archive's members decompress to {self.total + size} bytes "
                                                      "or more together", "archive_bytes")

    def add(self, name: str, size: int) -> None:
        if size > self.room():
            raise self.exceeded(name, size)
        self.total += size


def _member(archive: zipfile.ZipFile, data: bytes, decompressed: _Decompressed, name: str) -> Doc:
    file, member_limit, room = decompressed.file, limits.get("member_bytes"), decompressed.room()
    try:
        raw = read_member(archive, data, name, min(member_limit, room))
    except MemberTooLarge as exc:
        if room < member_limit:  # stopped by what the members before it left
            raise decompressed.exceeded(name, exc.size) from None
        raise limits.LimitExceeded(file, name, f"{exc.size} bytes or more once decompressed", "member_bytes") from None
    except MemberError as exc:
        raise AdapterError(file, name, one_line(f"cannot read this archive member: {exc}")) from None
    except _ZIP_ERRORS as exc:
        raise AdapterError(file, name, one_line(f"cannot read this archive member: {exc}")) from None
    decompressed.add(name, len(raw))
    return Doc(parse_json(decode_text(raw, file), file, name), file, f"{name}:")


def sample_order(sample: Doc) -> tuple[int, int, float, str]:
    """Epoch, then id: numbers first in numeric order, then text (inspect_ai's own order)."""
    value = sample.value if isinstance(sample.value, dict) else {}
    epoch = value.get("epoch")
    sample_id = value.get("id")
    epoch_key = epoch if isinstance(epoch, int) and not isinstance(epoch, bool) else 1
    if isinstance(sample_id, (int, float)) and not isinstance(sample_id, bool):
        return epoch_key, 0, float(sample_id), ""
    return epoch_key, 1, 0.0, str(sample_id)


def _read_with_inspect_ai(path: Path) -> tuple[Doc, list[Doc]]:
    """inspect_ai's own reader, its models dumped back to the dictionaries our mapping reads."""
    from inspect_ai.log import read_eval_log

    file = str(path)
    _check_declared_sizes(path)
    try:
        log = read_eval_log(file, resolve_attachments=True)
        spec = log.eval.model_dump(mode="json", exclude_none=True)
        samples = [s.model_dump(mode="json", exclude_none=True) for s in (log.samples or [])]
    except ValidationError:
        # inspect_ai's models refused a value: this module's reader names the field where the file is
        # bad, and reads it where inspect_ai is only stricter (a null metadata, a null score), so a log
        # is read alike with inspect_ai or without it
        return _read_own(path)[:2]
    except Exception as exc:  # noqa: BLE001 - whatever else inspect_ai raises (a log version it does not know)
        _read_own(path)  # says what is wrong with the file, when our reader sees it too
        raise AdapterError(file, ROOT, one_line(f"inspect_ai cannot read this log: {type(exc).__name__}: {exc}")) from None
    return Doc(spec, file, "eval"), [Doc(s, file, f"samples[{i}]") for i, s in enumerate(samples)]


def _check_declared_sizes(path: Path) -> None:
    """Before inspect_ai's reader (which bounds nothing itself): no member may claim more than
    ``member_bytes``, nor all of them together more than ``archive_bytes``; ``zipfile`` stops a member at
    the size it claims, so a claim is a bound."""
    limit, total_limit = limits.get("member_bytes"), limits.get("archive_bytes")
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except _ZIP_ERRORS:
        return  # not an archive, or a damaged one: the readers say what is wrong
    total = 0
    for info in members:
        if info.file_size > limit:
            raise limits.LimitExceeded(str(path), info.filename, f"{info.file_size} bytes once decompressed",
                                       "member_bytes")
        total += info.file_size
        if total > total_limit:
            raise limits.LimitExceeded(str(path), info.filename, f"the archive's members decompress to {total} "
                                                                 "bytes together", "archive_bytes")


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


def pass_mark() -> float:
    """The score at or above which a numeric score is ``pass``: the environment's, else 1.0."""
    raw = os.environ.get(PASS_MARK_VARIABLE, "").strip()
    if not raw:
        return DEFAULT_PASS_MARK
    try:
        mark = float(raw)
    except ValueError:
        mark = math.nan
    if not math.isfinite(mark):
        raise AdapterError(PASS_MARK_VARIABLE, "(environment)", f"expected a number, got {raw!r}")
    return mark


def score_label(value: Any, mark: float = DEFAULT_PASS_MARK) -> str | None:
    """A score value as a verdict label: a number graded against ``mark``, anything else as written."""
    if value is None:
        return None
    if isinstance(value, str):
        return value or None
    if isinstance(value, (bool, int, float)):
        number = float(value)
        if not math.isfinite(number):
            return None  # NaN: the scorer gave no grade
        return "pass" if number >= mark - 1e-9 else "fail"
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _verdict_kind(sample: Doc) -> str:
    """What the first score judged, where its scorer says so in ``metadata.verdict_kind`` (``proposal_time``
    or ``state_based``); ``unknown`` otherwise."""
    scores = sample.value.get("scores")
    first = next(iter(scores.values()), None) if isinstance(scores, dict) else sample.value.get("score")
    metadata = first.get("metadata") if isinstance(first, dict) else None
    kind = metadata.get("verdict_kind") if isinstance(metadata, dict) else None
    return kind if kind in VERDICT_KINDS else "unknown"


def _scores(sample: Doc) -> dict[str, Any]:
    scores = sample.opt("scores")
    if scores is not None:
        return {name: score.need("value").value for name, score in scores.entries()}
    legacy = sample.opt("score")
    return {"score": legacy.need("value").value} if legacy is not None else {}


def _trajectory(sample: Doc, spec: Doc, mark: float = DEFAULT_PASS_MARK) -> Trajectory:
    sample.as_dict()
    attachments = sample.value.get("attachments")
    if isinstance(attachments, dict) and attachments:
        sample = Doc(resolve_attachments(sample.value, attachments), sample.file, sample.path)
    builder = Builder()
    messages = sample.opt("messages")
    if messages is not None:
        _walk(messages, builder)
    scores = _scores(sample)
    label = score_label(next(iter(scores.values()), None), mark)
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
        original=OriginalVerdict(label=label, kind=_verdict_kind(sample)) if label else None,
        run_id=spec.str_at("run_id"),
        extra=extra,
        incomplete=_cut_short(sample),
    )
    session = _meta_text(meta, "ambient_session")
    return trajectory.model_copy(update={"ambient_session": session}) if session else trajectory


def _cut_short(sample: Doc) -> str | None:
    """How inspect_ai recorded the sample ending early: its error, or the limit it reached."""
    failure = sample.value.get("error")
    if isinstance(failure, dict) and (error := recorded_error(failure.get("message"))):
        return error
    limit = sample.value.get("limit")
    if isinstance(limit, dict) and isinstance(limit.get("type"), str):
        value = limit.get("limit")
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # a token limit of 1000000.0 reads 1000000, not 1e+06
        shown = f" ({value})" if isinstance(value, (int, float)) and not isinstance(value, bool) else ""
        return f"{limit['type']} limit reached{shown}"
    return None


def _meta_text(metadata: dict[str, Any], key: str) -> str | None:
    value = metadata.get(key)
    return value if isinstance(value, str) and value.strip() else None


@register_adapter
class InspectAdapter(Adapter):
    """``use_inspect_ai``: True/False forces a reader; None uses this module's for the log versions it knows
    and inspect_ai's, where it is importable, for the others (see the module docstring).
    ``pass_mark``: the score at or above which a numeric score is ``pass`` (default: see :func:`pass_mark`)."""

    name = "inspect"

    def __init__(self, use_inspect_ai: bool | None = None, pass_mark: float | None = None):
        self.use_inspect_ai = use_inspect_ai
        self.pass_mark = pass_mark

    @classmethod
    def sniff(cls, probe: Probe) -> bool:
        if probe.is_zip():
            names = probe.zip_names()
            known = "header.json" in names or "_journal/start.json" in names or any(n.startswith("samples/") for n in names)
            return known or probe.suffix == ".eval"  # a damaged archive still gets the inspect reader's diagnosis
        data = probe.json()
        return isinstance(data, dict) and isinstance(data.get("eval"), dict) and ("samples" in data or "version" in data)

    def load(self, path: Path) -> list[Trajectory]:
        try:
            spec, samples = self._read(path)
            spec.as_dict()
            mark = pass_mark() if self.pass_mark is None else self.pass_mark
            samples = sorted(samples, key=sample_order)
            trajectories = [_trajectory(sample, spec, mark) for sample in samples]
        except RecursionError:
            raise AdapterError(str(path), ROOT, "nested too deeply to read") from None
        unanswered = sum(t.source.extra.get("unpaired_results", 0) for t in trajectories)
        detail = plural(len(samples), "sample") + (f"; {plural(unanswered, 'tool result')} without a proposing tool call" if unanswered else "")
        return require_calls(trajectories, str(path), "samples[].messages", detail)

    def _read(self, path: Path) -> tuple[Doc, list[Doc]]:
        if self.use_inspect_ai is not None:
            return _read_with_inspect_ai(path) if self.use_inspect_ai else _read_own(path)[:2]
        try:
            spec, samples, version = _read_own(path)
        except limits.LimitExceeded:
            raise
        except AdapterError:
            if not inspect_ai_available():
                raise
            return _read_with_inspect_ai(path)  # it may know what this reader does not; else the same diagnosis
        if version not in KNOWN_LOG_VERSIONS and inspect_ai_available():
            return _read_with_inspect_ai(path)
        return spec, samples
