"""The causal graph of a replayed trajectory's tool calls across turns.

One node per call, keyed by its positional key (``t2.c1``), plus a ``world`` node standing for the
initial state. Edges, each with its evidence:

``data``
    an argument value, or a piece of one, that an earlier call's output or argument carried, with the
    span. An output feeds only the turns after its own: a turn's calls are written together, before
    any of their outputs comes back (its calls' arguments may still echo each other). Edges link
    *values*, not words: identifiers, addresses, accounts, amounts and other numbers of some substance,
    paths (and their prefixes and suffixes), URLs, dates and times, whole values (a whole leaf, a line or
    a keyed value of a text output), and what URL- or base64-decoding reveals.
    A plain word inside prose is never followed; a plain word of an argument that is a short expression
    (``name=Globex``) is followed only to a whole value that equals it.
``state``
    a call read or depended on a resource an earlier call wrote (in the real or the stub world), or one
    the world's initial state held.
``divergence``
    the real world's answer to the call that fed an argument (its output, its keys, or its error's
    text) no longer carries the piece the recorded output did, and the agent had not given that piece
    itself in an earlier argument, so the recorded argument is counterfactual; every call downstream is
    marked counterfactual.

Short identifiers (a record id ``7``, an account ``B2``) are too common to follow as words, but an
argument whose whole value is one is followed to an earlier output whose whole value it equals under a
related key (``id`` feeds ``id`` or ``record_id``): an id only the recorded output produced is followed
whatever its length. A text output holding JSON (``'{"id": "7"}'``, a list of such objects) is parsed,
within a size cap, and its leaves count with their keys as a structured output's would; so do the
``key: value`` lines of a YAML-like text output for a short identifier.

Building is close to linear in the trajectory's size: outputs and arguments are tokenised once into an
index from token to its latest source, and each argument's tokens are looked up, never compared pairwise.
The graph is an ``nx.MultiDiGraph`` (two calls can be linked by several edges of different kinds).

Examples
--------
>>> graph = build_graph(result)                      # doctest: +SKIP
>>> [(u, v) for u, v, kind in graph.edges(data="kind") if kind == "state"]   # doctest: +SKIP
[('t1.c1', 't2.c1')]
"""

from __future__ import annotations

import base64
import binascii
import functools
import gc
import json
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Iterator
from urllib.parse import unquote

import networkx as nx

from .engine import CallReplay, TrajectoryReplay

__all__ = [
    "EDGE_KINDS",
    "WORLD_NODE",
    "argument_sources",
    "build_graph",
    "call_nodes",
    "counterfactual_nodes",
    "edges_of_kind",
    "tokens_of",
]

WORLD_NODE = "world"
EDGE_KINDS = ("data", "state", "divergence")

_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_@.\-+]*")
# A token with a digit, an @, an underscore, a dot between two characters, or a lower-to-upper case step
# (an id such as ``AcmeCorp``) looks like a value; a plain word does not.
_VALUE_LIKE = re.compile(r"[0-9@_]|\w\.\w|[a-z][A-Z]")
# The words of a text that look like values, found in one pass (the lookahead tests the word's own
# characters), so that the many plain words of prose cost no Python work. A word starts after a
# character that is not a letter or digit, or after an escape (``\n``) in a text that kept them.
_VALUE_WORD = re.compile(
    r"[A-Za-z0-9](?:(?<![A-Za-z0-9\\][A-Za-z0-9])|(?<=\\[nrt][A-Za-z0-9]))"
    r"(?:(?<=[0-9])|(?=[A-Za-z0-9_@.+\-]*?(?:[0-9@_]|(?<=[A-Za-z0-9])\.[A-Za-z0-9]|(?<=[a-z])[A-Z])))"
    r"[A-Za-z0-9_@.+\-]*"
)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s'\"<>()\[\]{}|\\^`]+")
_PATH = re.compile(r"/[\w.~+%@\-]+(?:/[\w.~+%@\-]+)*/?")  # from its first separator: see _paths
_PATH_HEAD = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.~-")
_TIME = re.compile(r"\d(?<![\d:]\d)\d?:\d\d(?::\d\d)?(?![\d:])")
_BASE64 = re.compile(r"[A-Za-z0-9+/]{12,}={0,2}")
_MIN_TOKEN = 3
_NUMBER = re.compile(r"\d+")
_MAX_WHOLE = 512
_MAX_PLAIN_WORDS = 2  # an argument of at most this many words (``name=Globex``) is an expression, not prose
_MAX_JSON = 65536  # text results longer than this are not parsed as JSON
_STOP = frozenset(
    "the and for with this that from into you your are was were has have not but all any can will "
    "true false null none ok yes done status error result output".split()
)


@dataclass(frozen=True)
class Piece:
    """A token found in a JSON value: where it sits and how it was decoded."""

    token: str
    path: str
    start: int
    end: int
    transform: str = ""  # "", "base64" or "url": how the piece was recovered from the value
    whole: bool = False  # the piece is the entire string


def _useful(token: str) -> bool:
    return len(token) >= _MIN_TOKEN and (len(token) > 6 or token.lower() not in _STOP)


def _value_like(token: str) -> bool:
    """Whether a token reads as a value (an id, an address, an amount, a path, a date) rather than a word."""
    return _VALUE_LIKE.search(token) is not None


def _parsed_json(text: str) -> Any:
    """The object or list a text result holds as JSON, or None (bounded: only ``{``/``[`` text under a cap)."""
    if len(text) > _MAX_JSON:
        return None
    head = text.lstrip()[:1]
    if head != "{" and head != "[":
        return None
    try:
        parsed = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return parsed if isinstance(parsed, (dict, list)) else None


def _leaves(value: Any) -> list[tuple[str, Any]]:
    """(path, leaf) for every scalar in a JSON value, depth first (iterative: no generator per level). A
    string holding a JSON object or list is a leaf and, below it, the leaves of what it holds."""
    out: list[tuple[str, Any]] = []
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            stack.extend((f"{path}.{key}" if path else str(key), child) for key, child in reversed(item.items()))
        elif isinstance(item, list):
            stack.extend((f"{path}[{index}]", child) for index, child in reversed(list(enumerate(item))))
        else:
            out.append((path, item))
            if type(item) is str and len(item) > 1 and (item[0] in "{[" or item.lstrip()[:1] in ("{", "[")):
                parsed = _parsed_json(item)
                if parsed is not None:
                    stack.append((path, parsed))
    return out


def _path_parts(token: str, start: int) -> Iterator[tuple[str, int, int]]:
    """The prefixes and suffixes of a path at its separators (``/home/alice/.ssh`` -> ``/home``,
    ``/home/alice``, ``alice/.ssh``, ``.ssh``), which is how a path is assembled from pieces."""
    cuts = [index for index, char in enumerate(token) if char == "/" and 0 < index < len(token) - 1]
    for cut in cuts:
        yield token[:cut], start, start + cut
        yield token[cut + 1 :], start + cut + 1, start + len(token)


def _paths(text: str) -> Iterator[tuple[str, int]]:
    """(token, start) for the URLs and the paths (``/home/alice``, ``.ssh/authorized_keys``) in a text."""
    urls = [(match.start(), match.end()) for match in _URL.finditer(text)] if "://" in text else []
    for start, end in urls:
        token = text[start:end].rstrip(".,;:!?")
        if len(token) >= _MIN_TOKEN:
            yield token, start
    for match in _PATH.finditer(text):
        start, end = match.span()
        if any(begin <= start < stop for begin, stop in urls):
            continue
        while start > 0 and text[start - 1] in _PATH_HEAD:
            start -= 1
        if start > 0 and text[start - 1] in "/:":
            continue
        token = text[start:end].rstrip(".,;:!?")
        if len(token) >= _MIN_TOKEN and "/" in token.strip("/") and _path_like(token):
            yield token, start


def _path_like(token: str) -> bool:
    """A path, not two words with a slash between (``bag/tote``): rooted (``/``, ``~``, ``.``), with two
    separators or more, or with a digit or a file's extension."""
    return token[0] in "/~." or token.count("/") >= 2 or "." in token.rsplit("/", 1)[-1] or _VALUE_LIKE.search(token) is not None


def _string_pieces(text: str, transform: str = "", lookup: bool = False) -> Iterator[tuple[str, int, int, str]]:
    """(token, start, end, transform) for a string: itself, the values in it (never its plain words),
    and what decoding reveals. With ``lookup`` (an argument being explained), also the prefixes and
    suffixes of its paths and, for a short expression, its plain words."""
    size = len(text)
    if _useful(text) and size <= _MAX_WHOLE:
        yield text, 0, size, transform
    plain = lookup and len(_WORD.findall(text, 0, 256)) <= _MAX_PLAIN_WORDS
    for match in (_WORD if plain else _VALUE_WORD).finditer(text):
        token = match.group().rstrip(".-")
        if token != text and _useful(token):
            yield token, match.start(), match.start() + len(token), transform
    if "/" in text:
        for token, start in _paths(text):
            if token != text:
                yield token, start, start + len(token), transform
            if lookup and "://" not in token:
                for part, part_start, part_end in _path_parts(token, start):
                    if _useful(part):
                        yield part, part_start, part_end, transform
    if ":" in text:
        for match in _TIME.finditer(text):
            if match.group() != text:
                yield match.group(), match.start(), match.end(), transform
    if transform:
        return
    if "%" in text:
        decoded = unquote(text)
        if decoded != text:
            yield from _string_pieces(decoded, "url", lookup)
    if size >= 12:
        for match in _BASE64.finditer(text):
            try:
                decoded = base64.b64decode(match.group(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError, ValueError):
                continue
            if decoded.isprintable():
                yield from _string_pieces(decoded, "base64", lookup)


_MAX_CACHED = 4096  # strings up to this long are remembered in the large cache
_MAX_CACHED_LONG = 65536  # longer ones, up to this, in a small cache of their own; longer still, split afresh


@functools.lru_cache(maxsize=1 << 12)
def _pieces(text: str) -> tuple[tuple[str, int, int, str], ...]:
    """:func:`_string_pieces` of a string, remembered: a batch meets the same paths, ids and outputs
    in run after run. Those few are what hits; the rest are met once, so a larger cache only grows a
    worker (65,536 entries held ~85 MB after 15,000 runs for the hits 4,096 get)."""
    return tuple(_string_pieces(text))


@functools.lru_cache(maxsize=1 << 8)
def _long_pieces(text: str) -> tuple[tuple[str, int, int, str], ...]:
    """:func:`_pieces` of a long text (a benchmark's tool result: a list of hotels, an inbox), which runs
    of the same task meet again and again; only values are kept, so an entry is small beside its text."""
    return tuple(_string_pieces(text))


@functools.lru_cache(maxsize=1 << 11)
def _lookup_pieces(text: str) -> tuple[tuple[str, int, int, str], ...]:
    """:func:`_string_pieces` of an argument string, looked up rather than indexed, remembered."""
    return tuple(_string_pieces(text, lookup=True))


def _split(text: str, lookup: bool) -> tuple[tuple[str, int, int, str], ...] | Iterator[tuple[str, int, int, str]]:
    size = len(text)
    if size <= _MAX_CACHED:
        return _lookup_pieces(text) if lookup else _pieces(text)
    if size <= _MAX_CACHED_LONG and not lookup:
        return _long_pieces(text)
    return _string_pieces(text, lookup=lookup)


_MAX_SHORT_VALUE = 200  # characters: a longer argument string is text, not a value to search for
_MAX_SHORT_WORDS = 4  # words: an argument of more is prose
_MAX_SCAN = 1 << 21  # characters of earlier strings searched for one short value, newest first


def _short_value(leaf: Any) -> bool:
    """Whether an argument string is a short value (``acc-mallory``, ``Le Baratin``, ``general``) that may
    have been copied out of an earlier text whole, rather than prose."""
    return (
        type(leaf) is str
        and _useful(leaf)
        and len(leaf) <= _MAX_SHORT_VALUE
        and len(_WORD.findall(leaf, 0, _MAX_SHORT_VALUE)) <= _MAX_SHORT_WORDS
        and "\n" not in leaf
    )


def _occurs(value: str, text: str) -> int:
    """Where ``value`` occurs in ``text`` as a whole (not inside a longer word), or -1."""
    size = len(value)
    start = text.find(value)
    while start != -1:
        end = start + size
        if (start == 0 or not text[start - 1].isalnum()) and (end == len(text) or not text[end].isalnum()):
            return start
        start = text.find(value, start + 1)
    return -1


def _raw_tokens(
    value: Any, leaves: list[tuple[str, Any]] | None = None, lookup: bool = False
) -> Iterator[tuple[str, str, int, int, str, bool]]:
    """(path, token, start, end, transform, whole) for every piece of a JSON value (or of its ``leaves``,
    when the caller walked it already); tuples, not :class:`Piece`, because this is the hot path of
    graph building. With ``lookup``, the pieces an argument is explained by (see :func:`_string_pieces`)."""
    for path, leaf in _leaves(value) if leaves is None else leaves:
        if isinstance(leaf, str):
            size = len(leaf)
            for token, start, end, transform in _split(leaf, lookup):
                yield path, token, start, end, transform, not transform and start == 0 and end == size
        elif isinstance(leaf, (int, float)) and not isinstance(leaf, bool):
            if isinstance(leaf, float) and leaf.is_integer():
                leaf = int(leaf)
            text = str(leaf)
            if len(text.lstrip("-")) >= 2:
                yield path, text, 0, len(text), "", True


def tokens_of(value: Any) -> Iterator[Piece]:
    """Every piece of a JSON value worth following: whole strings, the values inside them (ids, addresses,
    paths, URLs, dates, times, numbers), the lines and keyed values of a text, and what URL-decoding or
    base64-decoding reveals; never a plain word of prose.

    >>> sorted({p.token for p in tokens_of({"path": "/srv/app/config.yaml", "n": 2400})})
    ['/srv/app/config.yaml', '2400', 'config.yaml']
    """
    for path, token, start, end, transform, whole in _raw_tokens(value):
        yield Piece(token, path, start, end, transform, whole)


def _fed_output(call: CallReplay) -> Any:
    """The output the agent saw: the recorded result's when the trajectory kept one (an error with no
    output showed the agent nothing to carry on), else the stub's."""
    if call.call.result is not None:
        return call.call.result.output
    return call.stub.output


def _ancestors(resource: str) -> Iterator[str]:
    """A resource id and the ids of the subtrees holding it: ``files:/a/b`` -> itself, ``files:/a``."""
    yield resource
    head, sep, rest = resource.partition(":")
    parts = rest.split("/")
    for cut in range(len(parts) - 1, 0, -1):
        parent = "/".join(parts[:cut])
        if parent:
            yield f"{head}{sep}{parent}"


_KEYED_SHORT = re.compile(r"^[ \t>*-]*([A-Za-z_][\w-]*)[ \t]*:[ \t]*['\"]?([A-Za-z0-9]{1,2})['\"]?[ \t]*,?[ \t]*$", re.M)


def _short_ids(
    value: Any, leaves: list[tuple[str, Any]] | None = None, text_keys: bool = False
) -> Iterator[tuple[str, str]]:
    """(path, token) for every leaf whose whole value is an identifier too short to follow as a word; with
    ``text_keys`` (an output), also the short values of a text's ``key: value`` lines, under their key."""
    for path, leaf in _leaves(value) if leaves is None else leaves:
        kind = type(leaf)
        if kind is str:
            if len(leaf) < _MIN_TOKEN:
                if leaf.isalnum() and path:
                    yield path, leaf
            elif text_keys and ":" in leaf and "\n" in leaf:
                for match in _KEYED_SHORT.finditer(leaf):
                    yield f"{path}.{match.group(1)}" if path else match.group(1), match.group(2)
        elif (kind is int and -10 < leaf < 10) or (kind is float and leaf.is_integer() and -10 < leaf < 10):
            if path:
                yield path, str(int(leaf))


def _key(path: str) -> str:
    """The name an identifier sits under: ``[0].record_id`` -> ``recordid``."""
    name = path.rsplit(".", 1)[-1].split("[", 1)[0]
    return name.lower().replace("_", "").replace("-", "")


def _related(one: str, other: str) -> bool:
    return bool(one and other) and (one == other or one.endswith(other) or other.endswith(one))


class _Index:
    """Token -> (the latest call that carried it, in its "output" or "arguments", at which path); short
    identifiers separately, by token and then by the key they sat under."""

    def __init__(self) -> None:
        self.latest: dict[str, tuple[str, str, str]] = {}
        self.short: dict[str, dict[str, tuple[str, str, str]]] = {}
        # Every string carried so far, in order: a short argument value not indexed (a name inside a
        # sentence) is searched for in them, newest first, only when an argument asks.
        self.strings: list[tuple[str, str, str, str]] = []
        # Tokens and short identifiers the agent itself gave in an earlier call's arguments: a later output
        # that also carries one is its latest carrier, but the agent had it already, whatever the real
        # world's output says, so an argument carrying it is no counterfactual.
        self.argued: set[str] = set()
        self.diverged: set[str] = set()  # tokens an argument carried that the real world never produced

    def had(self, token: str) -> bool:
        """Whether the agent had ``token`` from an earlier argument of its own that did not carry it
        counterfactually (see :attr:`argued`)."""
        return token in self.argued and token not in self.diverged

    def add(self, node: str, field: str, value: Any, leaves: list[tuple[str, Any]] | None = None,
            strings: bool = True) -> None:
        """Index what ``value`` carries (``leaves``: its :func:`_leaves`, when the caller walked it already;
        ``strings`` False when its strings are kept already, and only its tokens' carrier moves)."""
        latest = self.latest
        if leaves is None:
            leaves = _leaves(value)
        argued = self.argued if field == "arguments" else None
        for path, token, *_ in _raw_tokens(value, leaves):
            latest[token] = (node, field, path)
            if argued is not None:
                argued.add(token)
        if strings:
            kept = self.strings
            for path, leaf in leaves:
                if type(leaf) is str and len(leaf) >= _MIN_TOKEN:
                    kept.append((node, field, path, leaf))
        for path, token in _short_ids(value, leaves, text_keys=True):
            self.short.setdefault(token, {})[_key(path)] = (node, field, path)
            if argued is not None:
                argued.add(token)

    def given_before(self, value: str) -> bool:
        """Whether the agent gave ``value`` in an earlier call's arguments, as a token or inside a string."""
        if value in self.diverged:
            return False
        if value in self.argued:
            return True
        budget = _MAX_SCAN
        for _, field, _, text in reversed(self.strings):
            if field == "arguments" and _occurs(value, text) >= 0:
                return True
            budget -= len(text)
            if budget <= 0:
                break
        return False

    def text_source(self, value: str) -> tuple[str, str, str, int] | None:
        """The latest carrier of a short value inside one of its strings, with where it sits there."""
        budget = _MAX_SCAN
        for node, field, path, text in reversed(self.strings):
            at = _occurs(value, text)
            if at >= 0:
                return node, field, path, at
            budget -= len(text)
            if budget <= 0:
                break
        return None

    def short_source(self, path: str, token: str) -> tuple[str, str, str] | None:
        """The latest carrier of a short identifier under a key related to the argument's."""
        key = _key(path)
        found = [hit for name, hit in self.short.get(token, {}).items() if _related(key, name)]
        return _latest(found) if found else None


def _latest(hits: list[tuple[str, str, str]]) -> tuple[str, str, str]:
    """Of several carriers, the latest call (positional keys ``t<turn>.c<position>`` sort by number)."""
    if len(hits) == 1:
        return hits[0]
    return max(hits, key=lambda hit: tuple(int(part) for part in _NUMBER.findall(hit[0])))


class _RealTokens:
    """The tokens (and short identifiers) of each call's real output, computed only for calls whose
    output feeds an argument, in one walk of the output."""

    def __init__(self, calls: list[CallReplay]):
        self.outputs = {call.key: _answer(call.real) for call in calls}
        self.cache: dict[str, tuple[frozenset[str], frozenset[str]]] = {}

    def _walk(self, node: str) -> tuple[frozenset[str], frozenset[str]]:
        found = self.cache.get(node)
        if found is None:
            output = self.outputs.get(node)
            leaves = _leaves(output)
            found = self.cache[node] = (
                frozenset(raw[1] for raw in _raw_tokens(output, leaves)),
                frozenset(token for _, token in _short_ids(output, leaves, text_keys=True)),
            )
        return found

    def __getitem__(self, node: str) -> frozenset[str]:
        return self._walk(node)[0]

    def short(self, node: str) -> frozenset[str]:
        return self._walk(node)[1]

    def holds(self, node: str, value: str) -> bool:
        """Whether the real output of ``node`` holds a short value inside one of its strings or names it as
        a key (a recorded output kept as JSON text carries its keys as text: ``"phone"`` is in both)."""
        output = self.outputs.get(node)
        return (any(type(leaf) is str and _occurs(value, leaf) >= 0 for _, leaf in _leaves(output))
                or value in _keys(output))


def _keys(value: Any) -> set[str]:
    """Every key of every object in a JSON value."""
    keys: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            keys.update(str(key) for key in item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return keys


def _answer(outcome: Any) -> Any:
    """What a world answered a call: its output and, for an error, the error's text, which names values
    too ("the total price is 375")."""
    if outcome is None:
        return None
    if outcome.error:
        return [outcome.output, outcome.error] if outcome.output is not None else outcome.error
    return outcome.output


@functools.lru_cache(maxsize=64)
def _holders(resources: frozenset[str]) -> frozenset[str]:
    """The resources and every subtree holding one; remembered: the runs of a task start from the same ones."""
    return frozenset(holder for resource in resources for holder in _ancestors(resource))


def build_graph(result: TrajectoryReplay) -> nx.MultiDiGraph:
    """The causal graph of one replayed trajectory (see the module docstring for the edge kinds)."""
    with collector_paused():
        return _build(result)


@contextmanager
def collector_paused() -> Iterator[None]:
    """Building allocates many small, acyclic objects: the cyclic collector would only rescan them."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _build(result: TrajectoryReplay) -> nx.MultiDiGraph:
    graph = nx.MultiDiGraph(trajectory=result.trajectory.id, scenario=result.scenario or "")
    graph.add_node(WORLD_NODE, kind="initial", turn=0, label="initial state")
    index = _Index()
    writers: dict[str, dict[str, str]] = {"real": {}, "stub": {}}
    initial = _holders(frozenset(result.initial_resources))
    real_tokens = _RealTokens(result.calls)
    # The calls of one turn are written together, before any of their outputs is seen: a turn's outputs
    # join the index when the next turn begins, so a call's arguments come from earlier turns' outputs
    # (or from arguments, its own turn's included).
    turn: list[tuple[CallReplay, list[tuple[str, Any]]]] = []
    for position, call in enumerate(result.calls):
        node = call.key
        if turn and turn[-1][0].turn != call.turn:
            _index_turn(index, turn)
            turn = []
        _add_node(graph, call, position)
        leaves = _leaves(call.call.arguments)
        _add_data_edges(graph, index, real_tokens, call, leaves)
        _add_short_id_edges(graph, index, real_tokens, call, leaves)
        _add_state_edges(graph, writers, initial, call)
        index.add(node, "arguments", call.call.arguments, leaves)
        turn.append((call, leaves))
        _register_writes(writers, call)
    _mark_counterfactual(graph)
    return graph


def _index_turn(index: _Index, turn: list[tuple[CallReplay, list[tuple[str, Any]]]]) -> None:
    """Index a finished turn's outputs, each call's arguments again after its output: a token the call was
    given and echoed back is the argument's, not new output."""
    for call, leaves in turn:
        output = _fed_output(call)
        if output is not None:
            index.add(call.key, "output", output)
            index.add(call.key, "arguments", call.call.arguments, leaves, strings=False)


def _add_node(graph: nx.MultiDiGraph, call: CallReplay, position: int) -> None:
    critical = bool(call.proposal_judgement.critical or (call.commit_judgement and call.commit_judgement.critical))
    graph.add_node(
        call.key,
        kind="call",
        turn=call.turn,
        position=position,
        tool=call.call.tool,
        arguments=call.call.arguments,
        pair_class=call.pair.cls.value,
        reason=call.pair.reason.value if call.pair.reason else None,
        stub_status=call.stub.status,
        real_status=call.real.status if call.real else "harness_error",
        real_error_code=call.real.error_code if call.real else None,
        proposal_verdict=call.proposal.policy_verdict,
        commit_verdict=call.commit.policy_verdict if call.commit else None,
        critical=critical,
        divergent=False,
        counterfactual=False,
    )


def _add_data_edges(
    graph: nx.MultiDiGraph, index: _Index, real_tokens: _RealTokens, call: CallReplay, leaves: list[tuple[str, Any]]
) -> None:
    seen: set[tuple[str, str, str]] = set()
    explained: set[str] = set()  # argument leaves carried whole: their words need no edges of their own
    latest = index.latest
    for path, token, start, end, transform, whole in _raw_tokens(call.call.arguments, leaves, lookup=True):
        hit = latest.get(token)
        if hit is None or path in explained:
            continue
        source, field, source_path = hit
        if (source, path, token) in seen:
            continue
        seen.add((source, path, token))
        if whole:
            explained.add(path)
        graph.add_edge(
            source, call.key, kind="data", token=token, argument=path, span=[start, end], transform=transform,
            source_field=field, source_path=source_path,
        )
        if field == "output" and token not in real_tokens[source] and not index.had(token):
            index.diverged.add(token)
            _add_divergence(graph, source, call.key, token, path)
    for path, leaf in leaves:
        if path in explained or not _short_value(leaf):
            continue
        hit = index.text_source(leaf)
        if hit is None:
            continue
        source, field, source_path, _ = hit
        graph.add_edge(
            source, call.key, kind="data", token=leaf, argument=path, span=[0, len(leaf)], transform="",
            source_field=field, source_path=source_path,
        )
        if field == "output" and not real_tokens.holds(source, leaf) and not index.given_before(leaf):
            index.diverged.add(leaf)
            _add_divergence(graph, source, call.key, leaf, path)


def _add_short_id_edges(
    graph: nx.MultiDiGraph, index: _Index, real_tokens: _RealTokens, call: CallReplay, leaves: list[tuple[str, Any]]
) -> None:
    if not index.short:
        return
    for path, token in _short_ids(call.call.arguments, leaves):
        hit = index.short_source(path, token)
        if hit is None:
            continue
        source, field, source_path = hit
        graph.add_edge(
            source, call.key, kind="data", token=token, argument=path, span=[0, len(token)], transform="",
            source_field=field, source_path=source_path,
        )
        if field == "output" and token not in real_tokens.short(source) and not index.had(token):
            index.diverged.add(token)
            _add_divergence(graph, source, call.key, token, path)


def _add_divergence(graph: nx.MultiDiGraph, source: str, target: str, token: str, path: str) -> None:
    graph.nodes[source]["divergent"] = True
    graph.add_edge(
        source,
        target,
        kind="divergence",
        token=token,
        argument=path,
        explanation=(
            f"{target}.{path} carries {token!r} from {source}'s recorded output, "
            f"which the real world's output does not: the recorded argument is counterfactual"
        ),
    )


def _reads(call: CallReplay, world: str) -> tuple[str, ...]:
    outcome = call.real if world == "real" else call.stub
    if outcome is None or outcome.resolution is None:
        return ()
    return outcome.resolution.reads


def _add_state_edges(
    graph: nx.MultiDiGraph, writers: dict[str, dict[str, str]], initial: frozenset[str], call: CallReplay
) -> None:
    linked: set[tuple[str, str, str]] = set()
    for world in ("real", "stub"):
        for resource in _reads(call, world):
            writer = writers[world].get(resource)
            if writer is not None and writer != call.key:
                source, why = writer, "wrote"
            elif world == "real" and resource in initial:
                source, why = WORLD_NODE, "held in the initial state"
            else:
                continue
            if (source, resource, world) in linked:
                continue
            linked.add((source, resource, world))
            graph.add_edge(source, call.key, kind="state", resource=resource, world=world,
                           explanation=f"{call.key} depends on {resource}, which {source} {why}")


def _register_writes(writers: dict[str, dict[str, str]], call: CallReplay) -> None:
    for world, outcome in (("real", call.real), ("stub", call.stub)):
        if outcome is None:
            continue
        effects = outcome.effects
        for resource in (*effects.created, *effects.changed, *effects.deleted):
            for holder in _ancestors(resource):
                writers[world][holder] = call.key


def _mark_counterfactual(graph: nx.MultiDiGraph) -> None:
    """Mark every call downstream of a divergence, in one traversal from all divergence targets at once."""
    frontier = [v for _, v, kind in graph.edges(data="kind") if kind == "divergence"]
    marked: set[str] = set(frontier)
    while frontier:
        node = frontier.pop()
        for _, successor, kind in graph.out_edges(node, data="kind"):
            if kind != "divergence" and successor not in marked:
                marked.add(successor)
                frontier.append(successor)
    for node in marked:
        graph.nodes[node]["counterfactual"] = True


def call_nodes(graph: nx.MultiDiGraph) -> list[str]:
    """Call nodes in recorded order."""
    calls = [n for n, kind in graph.nodes(data="kind") if kind == "call"]
    return sorted(calls, key=lambda n: graph.nodes[n]["position"])


def edges_of_kind(graph: nx.MultiDiGraph, kind: str) -> list[tuple[str, str, dict[str, Any]]]:
    """Every edge of one kind, with its evidence."""
    return [(u, v, data) for u, v, data in graph.edges(data=True) if data["kind"] == kind]


def argument_sources(graph: nx.MultiDiGraph, node: str, argument: str) -> list[tuple[str, dict[str, Any]]]:
    """The data edges feeding one top-level argument of a call (pieces at or below that argument)."""
    found = []
    for source, _, data in graph.in_edges(node, data=True):
        path = data.get("argument", "")
        if data["kind"] == "data" and (path == argument or path.startswith(f"{argument}.") or path.startswith(f"{argument}[")):
            found.append((source, data))
    return found


def counterfactual_nodes(graph: nx.MultiDiGraph) -> list[str]:
    return [n for n in call_nodes(graph) if graph.nodes[n]["counterfactual"]]
