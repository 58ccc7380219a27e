"""Records: rows in a table, each with an owner, written through filters and optimistic versions.

Stub: the harness's view — an in-memory list of rows; a delete removes what the filter matched and an
update applies, whoever owns the row and whatever version the caller expected.
Profile ``owner-checked``: a stub that refuses a write touching a row the principal does not own (403), but
never compares versions.
Real: a real SQLite database. A write that touches any row the principal may not write is refused
whole (403, transaction rolled back); an update with a stale ``if_version`` is refused (409).

Both semantics share one filter language (:func:`parse_filter`), so stub and real match the same rows
and resolve the same ``matched`` ids; only the real world compiles it to parameterised SQL.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import math
import re
import sqlite3
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Collection, Iterable, Literal, Sequence

from ..domain import Call, Declaration, Domain, WorldEnv, register_domain, spec_section, tool
from ..errors import ServiceError, WorldSpecError
from ..values import bounded

__all__ = ["Clause", "RecordsReal", "RecordsStub", "compile_filter", "filter_matches", "parse_filter", "render_filter"]

COLUMNS = ("id", "owner", "version")
ROW_PREFIX = "records:row/"  # a row's resource id is this and the row's id
_ROW_KEY = re.compile(re.escape(ROW_PREFIX) + r"-?[0-9]{1,19}")
ROW_KEYS = ("id", "owner", "version", "data")
SECTION_KEYS = ("rows", "writers")
ADMIN_ROLE = "admin"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# --------------------------------------------------------------------------------------------------
# The filter language
# --------------------------------------------------------------------------------------------------

Op = Literal["=", "!="]

_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OP = re.compile(r"!=|==|=")
_SEPARATOR = re.compile(r"\s*(?:,|&&)\s*|\s+and(?:\s+|\Z)", re.IGNORECASE)
_SPACE = re.compile(r"\s*")
_INT_LITERAL = re.compile(r"[+-]?[0-9]{1,20}")
_FLOAT_LITERAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_BARE_VALUE = re.compile(r"[A-Za-z0-9_.:@/+-]+")
_QUOTES = "\"'"


@dataclass(frozen=True)
class Clause:
    """One ``key=value`` or ``key!=value`` test; ``value`` is the literal text, unquoted."""

    key: str
    op: Op
    value: str


def _bad_filter(message: str) -> ServiceError:
    return ServiceError(400, f"malformed filter: {message}")


def parse_filter(spec: Any) -> tuple[Clause, ...]:
    """Parse a filter string or an equality mapping; the empty tuple matches every row.

    Anything malformed raises ``ServiceError(400)`` and nothing else, because filters come from
    recorded agent calls and may be arbitrary text.
    """
    if isinstance(spec, Mapping):
        return tuple(_mapping_clause(key, value) for key, value in spec.items())
    if not isinstance(spec, str):
        raise _bad_filter(f"expected a string or a mapping, got {type(spec).__name__}")
    _check_text(spec, "filter")
    text = spec.strip()
    if text in ("", "*"):
        return ()
    clauses: list[Clause] = []
    pos = 0
    while True:
        clause, pos = _parse_clause(text, pos)
        clauses.append(clause)
        if pos == len(text):
            return tuple(clauses)
        separator = _SEPARATOR.match(text, pos)
        if separator is None:
            raise _bad_filter(f"expected ',', '&&' or 'and' at column {pos + 1}")
        pos = separator.end()


def _parse_clause(text: str, pos: int) -> tuple[Clause, int]:
    """One clause starting at ``pos``; returns it and the position just after its value."""
    pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
    key = _KEY.match(text, pos)
    if key is None:
        raise _bad_filter(f"expected a field name at column {pos + 1}")
    pos = _SPACE.match(text, key.end()).end()  # type: ignore[union-attr]
    op = _OP.match(text, pos)
    if op is None:
        raise _bad_filter(f"expected '=' or '!=' after {key.group()!r} at column {pos + 1}")
    pos = _SPACE.match(text, op.end()).end()  # type: ignore[union-attr]
    if pos < len(text) and text[pos] in _QUOTES:
        value, pos = _quoted(text, pos)
        rest = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if rest == len(text):
            pos = rest
    else:
        value, pos = _bare(text, pos)
    return Clause(key.group(), "!=" if op.group() == "!=" else "=", value), pos


def _quoted(text: str, pos: int) -> tuple[str, int]:
    """A quoted value; a backslash escapes the next character."""
    quote, pos, chars = text[pos], pos + 1, []
    while pos < len(text):
        char = text[pos]
        if char == "\\" and pos + 1 < len(text):
            chars.append(text[pos + 1])
            pos += 2
        elif char == quote:
            return "".join(chars), pos + 1
        else:
            chars.append(char)
            pos += 1
    raise _bad_filter(f"unterminated {quote} quote")


def _bare(text: str, pos: int) -> tuple[str, int]:
    """An unquoted value: everything up to the next separator, trimmed."""
    separator = _SEPARATOR.search(text, pos)
    end = separator.start() if separator else len(text)
    value = text[pos:end].strip()
    if not value:
        raise _bad_filter(f"missing value at column {pos + 1} (write \"\" for an empty string)")
    if "=" in value:
        raise _bad_filter(f"unexpected '=' in value {value!r}; quote values that contain '=' or separators")
    return value, end


def _mapping_clause(key: Any, value: Any) -> Clause:
    if not isinstance(key, str) or not _KEY.fullmatch(key):
        raise _bad_filter(f"field name {key!r} is not a name")
    if isinstance(value, (Mapping, list, tuple)):
        raise _bad_filter(f"value of {key!r} must be a scalar")
    if isinstance(value, float) and not math.isfinite(value):
        raise _bad_filter(f"value of {key!r} must be finite")
    text = value if isinstance(value, str) else json.dumps(value)
    _check_text(text, key)
    return Clause(key, "=", text)


def _check_text(text: str, what: str) -> None:
    """SQLite stores UTF-8: text that cannot be encoded (lone surrogates) is refused up front."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad_filter(f"{what} is not valid Unicode text") from None


def render_filter(clauses: Sequence[Clause], separator: str = " and ") -> str:
    """The filter text that parses back to ``clauses`` (quoting values where needed)."""
    if not clauses:
        return "*"
    return separator.join(f"{c.key}{c.op}{_render_value(c.value)}" for c in clauses)


def _render_value(value: str) -> str:
    if _BARE_VALUE.fullmatch(value):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _as_int(text: str) -> int | None:
    """The filter value as a 64-bit integer, if it is written as one."""
    if not _INT_LITERAL.fullmatch(text):
        return None
    number = int(text)
    return number if INT64_MIN <= number <= INT64_MAX else None


def _as_float(text: str) -> float | None:
    return float(text) if _FLOAT_LITERAL.fullmatch(text) else None


def _equals(value: Any, text: str) -> bool:
    """Filter equality: ints when both sides are ints, else strings (JSON spelling for true/false/null)."""
    if isinstance(value, bool):
        return text == ("true" if value else "false")
    if value is None:
        return text == "null"
    if isinstance(value, int):
        return _as_int(text) == value
    if isinstance(value, float):
        return _as_float(text) == value
    if isinstance(value, str):
        return value == text
    return False  # arrays and objects never equal a filter value


def filter_matches(row: Mapping[str, Any], clauses: Sequence[Clause]) -> bool:
    """Whether a row satisfies every clause; a missing data field is unequal to everything."""
    for clause in clauses:
        source = row if clause.key in COLUMNS else row["data"]
        equal = clause.key in source and _equals(source[clause.key], clause.value)
        if equal != (clause.op == "="):
            return False
    return True


def compile_filter(clauses: Sequence[Clause]) -> tuple[str, list[Any]]:
    """A SQL ``WHERE`` expression and its parameters, with the same meaning as :func:`filter_matches`.

    The SQL text is built only from fixed fragments; every key path and value is a bound parameter.
    """
    if not clauses:
        return "1", []
    parts: list[str] = []
    params: list[Any] = []
    for clause in clauses:
        sql, values = _compile_equality(clause)
        parts.append(sql if clause.op == "=" else f"NOT ({sql})")
        params.extend(values)
    return " AND ".join(f"({part})" for part in parts), params


def _compile_equality(clause: Clause) -> tuple[str, list[Any]]:
    """SQL for ``key = value`` that is always 0 or 1, never NULL."""
    value = clause.value
    if clause.key in ("id", "version"):
        return f"COALESCE({clause.key} = ?, 0)", [_as_int(value)]
    if clause.key == "owner":
        return "owner = ?", [value]
    path = f'$."{clause.key}"'
    sql = (
        "CASE json_type(data, ?)"
        " WHEN 'integer' THEN COALESCE(json_extract(data, ?) = ?, 0)"
        " WHEN 'real' THEN COALESCE(json_extract(data, ?) = ?, 0)"
        " WHEN 'text' THEN json_extract(data, ?) = ?"
        " WHEN 'true' THEN ? = 'true'"
        " WHEN 'false' THEN ? = 'false'"
        " WHEN 'null' THEN ? = 'null'"
        " ELSE 0 END"
    )
    return sql, [path, path, _as_int(value), path, _as_float(value), path, value, value, value, value]


# --------------------------------------------------------------------------------------------------
# Rows: loading, checking, digests
# --------------------------------------------------------------------------------------------------


def _json_problem(value: Any, path: str) -> tuple[str, str] | None:
    """The first part of ``value`` that SQLite's JSON would not store faithfully, as (path, reason)."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return None if INT64_MIN <= value <= INT64_MAX else (path, "integer out of the 64-bit range")
    if isinstance(value, float):
        return None if math.isfinite(value) else (path, "number must be finite")
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return path, "text is not valid Unicode"
        if "\x00" in value:
            return path, "text contains a NUL character, which SQLite's JSON functions truncate"
        return None
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            problem = _json_problem(item, f"{path}[{index}]")
            if problem:
                return problem
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{path}.{key}", "field names must be strings"
            problem = _json_problem(key, path) or _json_problem(item, f"{path}.{key}")
            if problem:
                return problem
        return None
    return path, f"{type(value).__name__} is not a JSON value"


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _canonical(value: Any) -> str:
    return _CANONICAL.encode(value)


def _digest(owner: str, version: int, data: Mapping[str, Any]) -> str:
    return hashlib.sha256(_canonical([owner, version, data]).encode("utf-8")).hexdigest()


@functools.lru_cache(maxsize=1 << 14)
def _stored_digest(owner: str, version: int, data: str) -> str:
    """The digest of a row as the database stores it (``data`` its JSON text): a batch meets the same
    initial rows world after world, and a write changes one row of many."""
    return _digest(owner, version, json.loads(data))


def _spec_int(raw: Mapping[str, Any], key: str, where: str, default: Any) -> int:
    value = raw.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise WorldSpecError(f"{where}.{key}", f"expected an integer, got {type(value).__name__}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise WorldSpecError(f"{where}.{key}", "integer out of the 64-bit range")
    return value


def _load_row(raw: Any, where: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise WorldSpecError(where, "expected a mapping with id, owner, version (optional), data (optional)")
    for key in raw:
        if key not in ROW_KEYS:
            raise WorldSpecError(f"{where}.{key}", f"unknown field; expected one of {', '.join(ROW_KEYS)}")
    if "id" not in raw:
        raise WorldSpecError(f"{where}.id", "missing; every row needs an integer id")
    owner = raw.get("owner")
    if not isinstance(owner, str) or _json_problem(owner, ""):
        raise WorldSpecError(f"{where}.owner", f"expected the owning principal's name, got {owner!r}")
    data = raw.get("data", {})
    if not isinstance(data, Mapping):
        raise WorldSpecError(f"{where}.data", f"expected a mapping, got {type(data).__name__}")
    problem = _json_problem(data, f"{where}.data")
    if problem:
        raise WorldSpecError(*problem)
    return {
        "id": _spec_int(raw, "id", where, None),
        "owner": owner,
        "version": _spec_int(raw, "version", where, 1),
        "data": json.loads(_canonical(data)),
    }


# A batch opens a world of the same few specs run after run. Rows sections met before, by their repr
# (which, unlike equality, tells 1 from 1.0 and True, and "1" from 1 as a field name): the checked rows as
# JSON, to give each world fresh objects of, and a database image of them for real worlds.
_SECTIONS: dict[str, str] = {}
_IMAGES: dict[str, bytes] = {}
_SECTIONS_KEPT = 32
_IMAGES_WORK = hasattr(sqlite3.Connection, "deserialize")  # Python 3.11 and later


def _load_rows(spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The spec's rows, checked, sorted by id."""
    return _loaded_rows(spec)[1]


def _loaded_rows(spec: Mapping[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """The spec's rows, checked, sorted by id, with the key they are remembered under."""
    section = spec_section(spec, "rows", "world.records", list, [])
    key = repr(section)
    text = _SECTIONS.get(key)
    if text is not None:
        return key, json.loads(text)
    rows = _check_rows(section)
    if len(_SECTIONS) >= _SECTIONS_KEPT:
        _SECTIONS.clear()
        _IMAGES.clear()
    _SECTIONS[key] = json.dumps(rows)
    return key, rows


def _check_rows(section: list[Any]) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    seen: set[int] = set()
    for index, raw in enumerate(section):
        where = f"world.records.rows[{index}]"
        row = _load_row(raw, where)
        if row["id"] in seen:
            raise WorldSpecError(f"{where}.id", f"duplicate id {row['id']}")
        seen.add(row["id"])
        rows.append(row)
    return sorted(rows, key=lambda row: row["id"])


def _load_writers(spec: Mapping[str, Any]) -> dict[str, tuple[str, ...]]:
    writers: dict[str, tuple[str, ...]] = {}
    for principal, owners in spec_section(spec, "writers", "world.records", dict, {}).items():
        where = f"world.records.writers.{principal}"
        if not isinstance(owners, list) or not all(isinstance(owner, str) for owner in owners):
            raise WorldSpecError(where, "expected a list of owner names")
        writers[str(principal)] = tuple(owners)
    return writers


# --------------------------------------------------------------------------------------------------
# Tool parameters, shared by both semantics
# --------------------------------------------------------------------------------------------------


def _int_param(value: Any, name: str) -> int:
    """An integer parameter; agents often send ids as digit strings, which resolve to the integer."""
    if isinstance(value, str) and _INT_LITERAL.fullmatch(value.strip()):
        value = int(value.strip())
    if not isinstance(value, int) or isinstance(value, bool):
        raise ServiceError(400, f"{name} must be an integer, got {value!r}")
    if not INT64_MIN <= value <= INT64_MAX:
        raise ServiceError(400, f"{name} {value} is out of range")
    return value


def _fields_param(fields: Any) -> dict[str, Any]:
    """The data fields an update sets; the store manages id, owner and version itself."""
    if not isinstance(fields, Mapping) or not fields:
        raise ServiceError(400, "fields must be a non-empty mapping of data field -> value")
    for key in fields:
        if key in COLUMNS:
            raise ServiceError(400, f"fields may not set {key!r}: it is managed by the store, not row data")
    problem = _json_problem(fields, "fields")
    if problem:
        raise ServiceError(400, f"{problem[0]}: {problem[1]}")
    return json.loads(_canonical(fields))


def _row_list(rows: Sequence[tuple[int, str]]) -> str:
    return ", ".join(f"{row_id} (owner {owner!r})" for row_id, owner in rows)


# --------------------------------------------------------------------------------------------------
# The domain
# --------------------------------------------------------------------------------------------------


class _Records(Domain):
    name = "records"
    declaration = Declaration(in_memory=True)  # an in-memory SQLite database

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        super().__init__(spec, env)
        for key in spec:
            if key not in SECTION_KEYS:
                raise WorldSpecError(f"world.records.{key}", f"unknown field; expected one of {', '.join(SECTION_KEYS)}")
        self.writers = _load_writers(spec)

    def _rows(self) -> list[dict[str, Any]]:
        """Every row, by id: ``{"id", "owner", "version", "data"}``."""
        raise NotImplementedError

    def values(self, resources: Collection[str]) -> dict[str, Any]:
        """A row: its id, owner, version and data."""
        wanted = set(resources)
        return {key: bounded(row) for row in self._rows() if (key := f"{ROW_PREFIX}{row['id']}") in wanted}

    def view(self) -> dict[str, Any]:
        """``rows``: every row (id, owner, version, data), by id."""
        return {"rows": bounded(self._rows(), max_items=1024)}


@register_domain
class RecordsStub(_Records):
    semantics = "stub"
    profiles = {
        "default": "a table that ignores ownership and versions",
        "owner-checked": "refuses (403) a write touching a row the principal does not own; never compares versions",
    }

    def _owner_check(self, call: Call, rows: Iterable[Mapping[str, Any]]) -> None:
        if self.profile != "owner-checked":
            return
        refused = [row["id"] for row in rows if row["owner"] != call.principal]
        if refused:
            raise ServiceError(403, f"{call.principal!r} may not write record(s) {', '.join(map(str, refused))}")

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        super().__init__(spec, env)
        self.rows = _load_rows(spec)
        self._changes = 0  # bumped by every write, so an unchanged count means an unchanged table
        self._snapshot_cache: tuple[int, dict[str, str]] | None = None
        self._digests: dict[int, str] = {}  # row id -> digest, dropped when a write touches the row

    def snapshot(self) -> dict[str, str]:
        if self._snapshot_cache is None or self._snapshot_cache[0] != self._changes:
            digests = self._digests
            state = {}
            for row in self.rows:
                digest = digests.get(row["id"])
                if digest is None:
                    digest = digests[row["id"]] = _digest(row["owner"], row["version"], row["data"])
                state[f"{ROW_PREFIX}{row['id']}"] = digest
            self._snapshot_cache = (self._changes, state)
        return dict(self._snapshot_cache[1])

    def _rows(self) -> list[dict[str, Any]]:
        return self.rows

    def _matched(self, call: Call, filter: Any) -> list[dict[str, Any]]:
        clauses = parse_filter(filter)
        matched = [row for row in self.rows if filter_matches(row, clauses)]
        call.resolve(matched=[row["id"] for row in matched])
        call.read(*(f"{ROW_PREFIX}{i}" for i in call.resolved["matched"]))
        return matched

    @tool
    def query_records(self, call: Call, filter: Any = "*") -> list[dict[str, Any]]:
        return copy.deepcopy(self._matched(call, filter))

    @tool
    def delete_records(self, call: Call, filter: Any) -> dict[str, Any]:
        rows = self._matched(call, filter)
        self._owner_check(call, rows)
        matched = {row["id"] for row in rows}
        self.rows = [row for row in self.rows if row["id"] not in matched]
        for row_id in matched:
            self._digests.pop(row_id, None)
        self._changes += 1
        return {"deleted": len(matched)}

    @tool
    def update_record(self, call: Call, id: Any, fields: Any, if_version: Any = None) -> dict[str, Any]:
        row_id = _int_param(id, "id")
        call.resolve(id=row_id)
        call.read(f"{ROW_PREFIX}{row_id}")
        changes = _fields_param(fields)
        if if_version is not None:
            _int_param(if_version, "if_version")  # well-formed, but the stub never compares it
        row = next((row for row in self.rows if row["id"] == row_id), None)
        if row is None:
            raise ServiceError(404, f"no record with id {row_id}")
        self._owner_check(call, [row])
        row["data"].update(changes)
        row["version"] += 1
        self._digests.pop(row_id, None)
        self._changes += 1
        return copy.deepcopy(row)


class _Transaction:
    """``with`` a transaction on a connection: a plain context manager, cheaper than a generator's for
    every write."""

    __slots__ = ("db",)

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        self.db.execute("ROLLBACK" if kind is not None else "COMMIT")


@register_domain
class RecordsReal(_Records):
    semantics = "real"

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        super().__init__(spec, env)
        key, rows = _loaded_rows(spec)
        # One world, one connection; an env server may answer from a worker thread.
        self.db = sqlite3.connect(":memory:", isolation_level=None, check_same_thread=False)
        self._snapshot_cache: tuple[int, dict[str, str]] | None = None
        image = _IMAGES.get(key)
        if image is not None:  # the same rows loaded before: a copy of that database, not the inserts again
            self.db.deserialize(image)
            return
        self.db.execute(
            "CREATE TABLE rows (id INTEGER PRIMARY KEY, owner TEXT NOT NULL, "
            "version INTEGER NOT NULL, data TEXT NOT NULL CHECK (json_valid(data)))"
        )
        with self._transaction() as db:
            db.executemany(
                "INSERT INTO rows (id, owner, version, data) VALUES (?, ?, ?, ?)",
                [(r["id"], r["owner"], r["version"], _canonical(r["data"])) for r in rows],
            )
        if _IMAGES_WORK and key in _SECTIONS:
            _IMAGES[key] = self.db.serialize()

    def close(self) -> None:
        self.db.close()

    def _transaction(self) -> "_Transaction":
        """An explicit transaction: any exception, a refusal included, rolls every write back."""
        return _Transaction(self.db)

    def snapshot(self) -> dict[str, str]:
        # The database counts every row it changes, so an unchanged count means an unchanged table.
        changes = self.db.total_changes
        if self._snapshot_cache is None or self._snapshot_cache[0] != changes:
            rows = self.db.execute("SELECT id, owner, version, data FROM rows ORDER BY id")
            state = {f"{ROW_PREFIX}{i}": _stored_digest(owner, version, data) for i, owner, version, data in rows}
            self._snapshot_cache = (changes, state)
        return dict(self._snapshot_cache[1])

    def _rows(self) -> list[dict[str, Any]]:
        return self._select("1", [])

    def values(self, resources: Collection[str]) -> dict[str, Any]:
        """A row: its id, owner, version and data (read for the rows asked for only)."""
        wanted = set(resources)
        ids = [int(key[len(ROW_PREFIX):]) for key in wanted if _ROW_KEY.fullmatch(key)]
        rows = self._select("id IN (SELECT value FROM json_each(?))", [json.dumps(ids)]) if ids else []
        return {key: bounded(row) for row in rows if (key := f"{ROW_PREFIX}{row['id']}") in wanted}

    def _select(self, where: str, params: list[Any]) -> list[dict[str, Any]]:
        # ``where`` comes from compile_filter: fixed SQL fragments only, every value bound.
        rows = self.db.execute(f"SELECT id, owner, version, data FROM rows WHERE {where} ORDER BY id", params)
        return [{"id": i, "owner": owner, "version": version, "data": json.loads(data)} for i, owner, version, data in rows]

    def _may_write(self, principal: str, owner: str) -> str | None:
        """Why ``principal`` may write rows owned by ``owner``, or None if it may not."""
        if owner == principal:
            return "own"
        if ADMIN_ROLE in (self.env.principals.get(principal, {}).get("roles") or ()):
            return f"{principal!r} has role {ADMIN_ROLE!r} and may write every row"
        if owner in self.writers.get(principal, ()):
            return f"{principal!r} may write rows owned by {owner!r} (world.records.writers)"
        return None

    def _authorize(self, call: Call, rows: Sequence[tuple[int, str]], action: str) -> None:
        """Refuse the whole write (403) if any row it touches is not the principal's to write."""
        principal = call.principal
        reasons = {owner: self._may_write(principal, owner) for _, owner in rows}
        refused = [(row_id, owner) for row_id, owner in rows if reasons[owner] is None]
        if refused:
            call.note(
                f"{action} refused whole: {principal!r} may not write row(s) {_row_list(refused)}; "
                f"the {action} matched row(s) {_row_list(rows)}; transaction rolled back, no row changed"
            )
            raise ServiceError(403, f"{principal!r} may not write record(s) {', '.join(str(i) for i, _ in refused)}")
        for reason in sorted({r for r in reasons.values() if r not in (None, "own")}):
            call.note(reason)

    @tool
    def query_records(self, call: Call, filter: Any = "*") -> list[dict[str, Any]]:
        rows = self._select(*compile_filter(parse_filter(filter)))
        call.resolve(matched=[row["id"] for row in rows])
        call.read(*(f"{ROW_PREFIX}{i}" for i in call.resolved["matched"]))
        return rows

    @tool
    def delete_records(self, call: Call, filter: Any) -> dict[str, Any]:
        where, params = compile_filter(parse_filter(filter))
        with self._transaction() as db:
            matched = [(row["id"], row["owner"]) for row in self._select(where, params)]
            call.resolve(matched=[row_id for row_id, _ in matched])
            call.read(*(f"{ROW_PREFIX}{i}" for i in call.resolved["matched"]))
            self._authorize(call, matched, "delete")
            deleted = db.execute(f"DELETE FROM rows WHERE {where}", params).rowcount
        if matched:
            call.note(f"deleted row(s) {_row_list(matched)}")
        return {"deleted": deleted}

    @tool
    def update_record(self, call: Call, id: Any, fields: Any, if_version: Any = None) -> dict[str, Any]:
        row_id = _int_param(id, "id")
        call.resolve(id=row_id)
        call.read(f"{ROW_PREFIX}{row_id}")
        changes = _fields_param(fields)
        expected = None if if_version is None else _int_param(if_version, "if_version")
        with self._transaction() as db:
            found = db.execute("SELECT owner, version, data FROM rows WHERE id = ?", (row_id,)).fetchone()
            if found is None:
                raise ServiceError(404, f"no record with id {row_id}")
            owner, version, data = found
            self._authorize(call, [(row_id, owner)], "update")
            if expected is not None and expected != version:
                call.note(f"if_version {expected} is stale: row {row_id} is at version {version}; refused, row unchanged")
                raise ServiceError(409, f"record {row_id} is at version {version}, not {expected}")
            db.execute(
                "UPDATE rows SET data = ?, version = version + 1 WHERE id = ? AND version = ?",
                (_canonical({**json.loads(data), **changes}), row_id, version),
            )
        call.note(f"updated row {row_id} (owner {owner!r}) from version {version} to {version + 1}")
        return self._select("id = ?", [row_id])[0]
