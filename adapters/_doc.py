"""Typed access to a foreign document, so every complaint names the file and the field.

Foreign logs are read as plain JSON-like values and walked through :class:`Doc`, which carries the path
of each value (``samples[0].messages[3].tool_calls[1].function``). A wrong type or a missing key
anywhere becomes one :class:`AdapterError` naming the file and that path, never a ``KeyError``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator, NoReturn

from litmus_replay.replay.errors import AdapterError

ROOT = "(root)"
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_\-]+")


def one_line(text: str, limit: int = 300) -> str:
    """Error messages are printed as one line; keep them short and single-line."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def kind(value: Any) -> str:
    """How a value reads in an error message."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


class Doc:
    """A value read from ``file`` at ``path``; accessors check types and fail with the path.

    A child's path is spelled out only when something asks for it (a failure, mostly): reading a log
    visits every value once, and most never need theirs.
    """

    __slots__ = ("value", "file", "_path", "_parent", "_key")

    def __init__(self, value: Any, file: str, path: str = ROOT):
        self.value = value
        self.file = file
        self._path: str | None = path
        self._parent: Doc | None = None
        self._key: Any = None

    @property
    def path(self) -> str:
        if self._path is None:
            assert self._parent is not None
            self._path = self._parent._child(self._key)
            self._parent = None
        return self._path

    def _at(self, key: Any, value: Any) -> Doc:
        """The child ``value`` found under ``key``, its path left to be spelled out on demand."""
        child = Doc(value, self.file)
        child._path, child._parent, child._key = None, self, key
        return child

    def fail(self, message: str, field: str | None = None) -> NoReturn:
        raise AdapterError(self.file, one_line(field or self.path), one_line(message))

    def _child(self, key: Any) -> str:
        if isinstance(key, int):
            part = f"[{key}]"
        else:  # YAML may have non-string keys; quote anything that is not a plain word
            key = str(key)
            part = key if _PLAIN_KEY.fullmatch(key) else f"[{json.dumps(key)}]"
        if self.path == ROOT:
            return part
        if self.path.endswith(":"):  # a JSONL line: "line 3: resourceSpans"
            return f"{self.path} {part}"
        return f"{self.path}{part}" if part.startswith("[") else f"{self.path}.{part}"

    # -- structure -------------------------------------------------------------------------------

    def is_dict(self) -> bool:
        return isinstance(self.value, dict)

    def is_list(self) -> bool:
        return isinstance(self.value, list)

    def as_dict(self) -> dict[str, Any]:
        if not isinstance(self.value, dict):
            self.fail(f"expected an object, got {kind(self.value)}")
        return self.value

    def as_list(self) -> list[Any]:
        if not isinstance(self.value, list):
            self.fail(f"expected a list, got {kind(self.value)}")
        return self.value

    def has(self, key: str) -> bool:
        return key in self.as_dict()

    def need(self, key: str) -> Doc:
        """The value at ``key``, which must be present (it may be null)."""
        data = self.as_dict()
        if key not in data:
            self.fail(f"missing required field {key!r}", self._child(key))
        return self._at(key, data[key])

    def opt(self, key: str) -> Doc | None:
        """The value at ``key``, or None when it is absent or null."""
        data = self.as_dict()
        if data.get(key) is None:
            return None
        return self._at(key, data[key])

    def elements(self) -> Iterator[Doc]:
        for index, value in enumerate(self.as_list()):
            yield self._at(index, value)

    def entries(self) -> Iterator[tuple[str, Doc]]:
        for key, value in self.as_dict().items():
            yield key, self._at(key, value)

    # -- scalars ---------------------------------------------------------------------------------

    def as_str(self) -> str:
        if not isinstance(self.value, str):
            self.fail(f"expected a string, got {kind(self.value)}")
        return self.value

    def as_name(self) -> str:
        """A non-empty string (a tool name, a role)."""
        text = self.as_str()
        if not text.strip():
            self.fail("expected a non-empty name, got an empty string")
        return text

    def as_bool(self) -> bool:
        if not isinstance(self.value, bool):
            self.fail(f"expected true or false, got {kind(self.value)}")
        return self.value

    def as_number(self) -> float:
        if isinstance(self.value, bool) or not isinstance(self.value, (int, float)):
            self.fail(f"expected a number, got {kind(self.value)}")
        return float(self.value)

    def as_id(self) -> str:
        """An identifier: JSON-RPC and some logs use numbers as ids."""
        if isinstance(self.value, bool) or not isinstance(self.value, (str, int, float)):
            self.fail(f"expected a string or number id, got {kind(self.value)}")
        return str(self.value)

    def str_at(self, key: str) -> str | None:
        doc = self.opt(key)
        return None if doc is None else doc.as_str()

    def id_at(self, key: str) -> str | None:
        doc = self.opt(key)
        return None if doc is None else doc.as_id()

    def bool_at(self, key: str, default: bool = False) -> bool:
        doc = self.opt(key)
        return default if doc is None else doc.as_bool()


# -- reading files ---------------------------------------------------------------------------------


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise AdapterError(str(path), ROOT, one_line(f"cannot read: {exc.strerror or exc}")) from None


_BOMS = (  # longest first: the UTF-32 LE mark begins with the UTF-16 LE one
    (b"\xff\xfe\x00\x00", "utf-32"),
    (b"\x00\x00\xfe\xff", "utf-32"),
    (b"\xef\xbb\xbf", "utf-8-sig"),
    (b"\xff\xfe", "utf-16"),
    (b"\xfe\xff", "utf-16"),
)


def bom_encoding(data: bytes) -> str | None:
    """The encoding a byte-order mark at the start of ``data`` declares, or None."""
    return next((encoding for mark, encoding in _BOMS if data.startswith(mark)), None)


UTF16_WITHOUT_BOM = "UTF-16 text without a byte-order mark; save it as UTF-8"


def looks_like_utf16(data: bytes) -> bool:
    """Text saved as UTF-16 without a byte-order mark: ASCII characters alternate with zero bytes."""
    head = data[:64]
    return len(head) >= 4 and b"\x00" in head and (head[1::2].count(0) >= len(head) // 4 or head[0::2].count(0) >= len(head) // 4)


def decode_text(data: bytes, file: str) -> str:
    """Text in UTF-8 (with or without a byte-order mark), or UTF-16/UTF-32 that a byte-order mark declares."""
    encoding = bom_encoding(data)
    if encoding is None and looks_like_utf16(data):
        raise AdapterError(file, ROOT, UTF16_WITHOUT_BOM)
    encoding = encoding or "utf-8"
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise AdapterError(file, f"byte {exc.start}", f"not {encoding.upper().replace('-SIG', '')} text") from None


def parse_json(text: str, file: str, where: str = "", line: int | None = None) -> Any:
    """Parse JSON text; a syntax error names where (``where``, or JSONL ``line``) and the position."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        if line is not None:
            field = f"line {line}, column {exc.colno}"
        else:
            field = f"{where + ': ' if where else ''}line {exc.lineno}, column {exc.colno}"
        raise AdapterError(file, field, f"not valid JSON ({exc.msg})") from None
    except (ValueError, RecursionError) as exc:
        field = f"line {line}" if line is not None else (where or ROOT)
        raise AdapterError(file, field, f"not valid JSON ({json_refusal(exc)})") from None


def json_refusal(exc: ValueError | RecursionError) -> str:
    """Why the JSON parser refused text that is not a syntax error, in the user's words."""
    if isinstance(exc, RecursionError):
        return "nested too deeply to read"
    # Python's message on a huge integer ends with advice meant for programmers: keep what it says, not that.
    return one_line(str(exc).split(";")[0])


def read_json(path: Path) -> Any:
    return parse_json(decode_text(read_bytes(path), str(path)), str(path))


def _parses(text: str) -> bool:
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


def read_json_or_lines(path: Path) -> list[Doc]:
    """The roots of one JSON document, or of JSON Lines (one root per non-blank line, path ``line N:``)."""
    file = str(path)
    text = decode_text(read_bytes(path), file)
    try:
        return [Doc(json.loads(text), file)]
    except (ValueError, RecursionError):
        pass
    lines = [(number, line) for number, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if len(lines) < 2 or not _parses(lines[0][1]):
        # one document (a pretty-printed one whose first line is no JSON of its own): raises, naming
        # where the JSON breaks
        return [Doc(parse_json(text, file), file)]
    return [Doc(parse_json(raw, file, line=number), file, f"line {number}:") for number, raw in lines]
