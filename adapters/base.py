"""The adapter extension point: one class per foreign format, registered by name, and format sniffing.

Adapters can be added through the ``litmus_replay.adapters`` entry-point group. Every failure to read a
file is an :class:`AdapterError` naming the file and the field. ``detect_format`` asks every registered
adapter whether a file looks like its format (:meth:`Adapter.sniff`); exactly one must say yes.
"""

from __future__ import annotations

import io
import json
import zipfile
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, ClassVar

import yaml

from litmus_replay.envs.plugins import PluginGroup
from litmus_replay.replay.errors import AdapterError, ReplayError, UnknownName
from litmus_replay.replay.model import Trajectory

from ._doc import UTF16_WITHOUT_BOM, bom_encoding, json_refusal, looks_like_utf16

ENTRY_POINT_GROUP = "litmus_replay.adapters"
AUTO = "auto"

_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_NOTHING: Any = object()


class Probe:
    """What sniffing looks at: suffix, bytes, and the content parsed once, lazily, as JSON, JSONL or YAML.

    Every accessor returns None when the content is not of that kind; nothing here raises but reading.
    Adapters may keep derived facts in :attr:`cache` so that several sniffers share one parse.
    """

    def __init__(self, path: Path):
        self.path = path
        self.suffix = path.suffix.lower()
        self.cache: dict[str, Any] = {}
        try:
            self.data = path.read_bytes()
        except OSError as exc:
            raise AdapterError(str(path), "(root)", f"cannot read: {exc.strerror or exc}") from None
        self._text: Any = _NOTHING
        self._json: Any = _NOTHING
        self._line: Any = _NOTHING
        self._yaml: Any = _NOTHING

    def is_zip(self) -> bool:
        return self.data[:4] == b"PK\x03\x04"

    def zip_names(self) -> list[str]:
        if "zip_names" not in self.cache:
            try:
                with zipfile.ZipFile(io.BytesIO(self.data)) as archive:
                    self.cache["zip_names"] = archive.namelist()
            except Exception:  # noqa: BLE001 - any unreadable archive is simply "not a zip log"
                self.cache["zip_names"] = []
        return self.cache["zip_names"]

    def text(self) -> str | None:
        if self._text is _NOTHING:
            try:
                self._text = None if self.is_zip() else self.data.decode(bom_encoding(self.data) or "utf-8")
            except UnicodeDecodeError:
                self._text = None
        return self._text

    def problem(self) -> str | None:
        """What makes the file unreadable whatever its format, in words; None when nothing does."""
        if not self.data.strip():
            return "an empty file: nothing to replay"
        if self.is_zip():
            return None
        if bom_encoding(self.data) is None and looks_like_utf16(self.data):
            return UTF16_WITHOUT_BOM
        if self.text() is None:
            return None
        if _too_deep(self.text() or ""):
            return f"JSON nested too deeply to read (more than {_MAX_DEPTH} levels of lists and objects)"
        return None

    def json(self) -> Any:
        """The whole file as one JSON document, or None."""
        if self._json is _NOTHING:
            self._json = _loads(self.text())
        return self._json

    def first_line(self) -> Any:
        """The first non-blank line as JSON (JSON Lines), or None."""
        if self._line is _NOTHING:
            text = self.text() or ""
            line = next((line for line in text.splitlines() if line.strip()), None)
            self._line = _loads(line)
        return self._line

    def yaml(self) -> Any:
        """The file as YAML, when it is not JSON (YAML is a superset), or None."""
        if self._yaml is _NOTHING:
            self._yaml = None
            text = self.text()
            if text is not None and self.json() is None and self.first_line() is None:
                try:
                    self._yaml = yaml.load(text, Loader=_YAML_LOADER)  # noqa: S506 - a safe loader
                except Exception:  # noqa: BLE001 - not YAML, or YAML the loader refuses
                    self._yaml = None
        return self._yaml

    def describe(self) -> str:
        """What the file looked like, for the error that says no adapter recognised it."""
        if not self.data.strip():
            return "an empty file"
        if self.is_zip():
            return f"a ZIP archive holding {', '.join(self.zip_names()[:5]) or 'nothing readable'}"
        if self.text() is None:
            return "binary data"
        for what, value in (("a JSON", self.json()), ("JSON Lines whose first line is a JSON", self.first_line())):
            if isinstance(value, dict):
                return f"{what} object with keys {', '.join(sorted(value)[:8]) or '(none)'}"
            if isinstance(value, list):
                return f"{what} list of {len(value)} items"
            if value is not None:
                return f"{what} scalar"
        if isinstance(self.yaml(), dict):
            return f"YAML with keys {', '.join(sorted(map(str, self.yaml()))[:8])}"
        return f"text that is neither JSON, JSON Lines nor YAML{_json_problem(self.text() or '')}"


def _json_problem(text: str) -> str:
    """Where JSON-looking text breaks (a truncated log is the usual case), as a parenthesis."""
    if not text.lstrip().startswith(("{", "[")):
        return ""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        return f" (as JSON: {exc.msg} at line {exc.lineno}, column {exc.colno})"
    except ValueError as exc:  # a number past the conversion limit, which the parser refuses whole
        return f" (as JSON: {json_refusal(exc)})"
    except RecursionError:
        pass
    return ""


_MAX_DEPTH = 500


def _too_deep(text: str) -> bool:
    """Whether JSON-looking text nests lists and objects deeper than a reader can follow."""
    stripped = text.lstrip()
    if not stripped.startswith(("{", "[")):
        return False
    try:
        json.loads(stripped)
    except RecursionError:
        return True
    except ValueError:
        pass
    depth = deepest = 0
    in_string = escaped = False
    for char in stripped[: 1 << 20]:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
            if deepest > _MAX_DEPTH:
                return True
        elif char in "]}":
            depth -= 1
    return False


def _loads(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


class Adapter(ABC):
    """Reads one foreign trajectory format."""

    name: ClassVar[str]

    @abstractmethod
    def load(self, path: Path) -> list[Trajectory]:
        """Every trajectory in the file, in file order."""

    @classmethod
    def sniff(cls, probe: Probe) -> bool:
        """Whether the file looks like this format; adapters that cannot tell leave it False."""
        return False


_ADAPTERS: dict[str, type[Adapter]] = {}
_PLUGINS = PluginGroup(ENTRY_POINT_GROUP, "adapter")  # importing a plug-in's module registers its adapter


def register_adapter(cls: type[Adapter]) -> type[Adapter]:
    if cls.name == AUTO:
        raise ValueError(f"{AUTO!r} is reserved for format detection")
    _ADAPTERS[cls.name] = cls
    return cls


def adapter_names() -> list[str]:
    _PLUGINS.load()
    return sorted(_ADAPTERS)


def get_adapter(name: str) -> Adapter:
    """The adapter registered under ``name``; raises :class:`UnknownName` listing the valid ones (or saying
    why the plug-in of that name failed to load)."""
    if name not in adapter_names():
        raise UnknownName("format", name, adapter_names(), failure=_PLUGINS.explain(name))
    return _ADAPTERS[name]()


def detect_format(path: str | Path) -> str:
    """The name of the one adapter whose format the file looks like.

    Raises :class:`AdapterError` naming the file when no adapter, or more than one, recognises it.
    """
    path = Path(path)
    probe = Probe(path)
    matches = []
    for name in adapter_names():
        try:
            if _ADAPTERS[name].sniff(probe):
                matches.append(name)
        except Exception:  # noqa: BLE001 - a sniffer that trips over odd content has not recognised it
            continue
    if len(matches) == 1:
        return matches[0]
    problem = probe.problem()
    if problem is not None:
        raise AdapterError(str(path), "(root)", problem)
    if matches:
        looked = " or ".join(matches)
    else:
        looked = f"{probe.describe()}, which no adapter recognises"
    raise AdapterError(
        str(path), "format", f"cannot tell the format of {path}: looked like {looked}; pass --format (one of: {', '.join(adapter_names())})"
    )


def load_trajectories(path: str | Path, format: str = AUTO) -> list[Trajectory]:
    """Every trajectory in ``path``, read by the named adapter (or the one :func:`detect_format` picks)."""
    path = Path(path)
    name = detect_format(path) if format == AUTO else format
    adapter = get_adapter(name)
    try:
        return adapter.load(path)
    except ReplayError:
        raise
    except RecursionError:
        raise AdapterError(str(path), "(root)", "nested too deeply to read") from None
    except Exception as exc:  # noqa: BLE001 - bad input must cost one line, never a traceback
        message = " ".join(f"the {name} adapter failed on this file ({type(exc).__name__}: {exc}); please report it".split())
        raise AdapterError(str(path), "(adapter)", message[:400]) from None
