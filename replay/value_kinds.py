"""Values compared as benchmarks compare them: per kind, not byte for byte.

An agent writes ``http://www.example.com/`` where a goal says ``www.example.com``, ``Mark@Example.com``
where a check lowers the case, an IBAN with spaces, an id as a number where the tool took a string. A rule
that compares exactly calls such a call harmless although the environment committed it; one that compares
by kind agrees with the benchmark's own tools and checks (AgentDojo strips a URL's scheme, lowers e-mail
addresses and IBANs before comparing).

Kinds and their normal form:

``url``   lower case, without scheme (``https://``) and trailing ``/``
``site``  a URL's host: lower case, without scheme, ``www.``, port or path (``www.evil.com/a`` and
          ``https://evil.com/b`` are one site)
``email`` lower case, without ``mailto:``
``iban``  upper case, without spaces or dashes
``phone`` digits only
``id``    an integer's decimal digits (``7``, ``"7"`` and ``7.0`` are one id), else the text stripped
``text``  case-folded, runs of white space as one space

Two policy functions use them (:data:`FUNCTIONS`): ``carries(value, kind, wanted)`` — some leaf of
``value`` (a map, a list, or one value) is ``wanted`` in its normal form; ``mentions(value, kind, wanted)`` —
some text leaf contains it (or one of a list of them).

Examples
--------
>>> normal("HTTPS://www.Example.com/", "url")
'www.example.com'
>>> carries({"recipients": ["Mark@x.com"]}, "email", "mark@x.com")
True
>>> mentions({"body": "see http://www.evil.com now"}, "url", "www.evil.com")
True
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Callable, Iterator

__all__ = ["FUNCTIONS", "KINDS", "carries", "kind_of", "leaves", "mentions", "normal"]

KINDS = ("url", "site", "email", "iban", "phone", "id", "text")

_SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*://")
_SPACE = re.compile(r"\s+")
_EMAIL = re.compile(r"^(?:mailto:)?[\w.+'-]+@[\w-]+(?:\.[\w-]+)+$", re.IGNORECASE)
_URL = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|www\.)\S+$|^[\w-]+(?:\.[\w-]+)*\.[a-z]{2,}/\S*$", re.IGNORECASE)
_IBAN = re.compile(r"^[A-Z]{2}\d{2}[A-Z0-9]{10,30}$")
_INTEGER = re.compile(r"^[+-]?\d+$")


def normal(value: Any, kind: str) -> str | None:
    """``value`` in the normal form of ``kind``; None for a value of no comparable kind (a map, a bool)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, (str, int, float)):
        return None
    text = str(value).strip()
    if kind == "url":
        return _SCHEME.sub("", text.lower()).rstrip("/")
    if kind == "site":
        if _EMAIL.match(text):  # an address on a site is not the site
            return ""
        host = re.split(r"[/?#]", _SCHEME.sub("", text.lower()), maxsplit=1)[0].rsplit("@", 1)[-1].split(":")[0]
        return host.removeprefix("www.") if "." in host else ""
    if kind == "email":
        lowered = text.lower()
        return lowered[7:] if lowered.startswith("mailto:") else lowered
    if kind == "iban":
        return re.sub(r"[\s-]", "", text).upper()
    if kind == "phone":
        return re.sub(r"\D", "", text)
    if kind == "id":  # an integer's digits, without sign or leading zeros (no int(): a long one would raise)
        return (text.lstrip("+-").lstrip("0") or "0") if _INTEGER.match(text) else text
    if kind == "text":
        return _SPACE.sub(" ", text.casefold())
    raise ValueError(f"unknown value kind {kind!r}; choose one of: {', '.join(KINDS)}")


def kind_of(value: Any) -> str:
    """The kind a value looks like: ``email``, ``url``, ``iban``, ``id`` (an integer), else ``text``."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return "id"
    text = str(value).strip()
    if _EMAIL.match(text):
        return "email"
    if _IBAN.match(re.sub(r"\s", "", text)):
        return "iban"
    if _URL.match(text):
        return "url"
    if _INTEGER.match(text):
        return "id"
    return "text"


def leaves(value: Any, depth: int = 0) -> Iterator[Any]:
    """Every scalar inside ``value`` (map values and list items, recursively, to a bounded depth)."""
    if isinstance(value, Mapping):
        if depth < 16:
            for item in value.values():
                yield from leaves(item, depth + 1)
    elif isinstance(value, (list, tuple)):
        if depth < 16:
            for item in value:
                yield from leaves(item, depth + 1)
    else:
        yield value


def carries(value: Any, kind: str, wanted: Any) -> bool:
    """``carries(value, kind, wanted)``: some leaf of ``value`` is ``wanted``, both in ``kind``'s normal form."""
    target = normal(wanted, kind)
    if not target:
        return False
    return any(normal(leaf, kind) == target for leaf in leaves(value))


def mentions(value: Any, kind: str, wanted: Any) -> bool:
    """``mentions(value, kind, wanted)``: some text leaf of ``value`` contains ``wanted`` in ``kind``'s normal form
    (for a URL, e-mail or IBAN the leaf is lowered, or stripped of spaces, as the value is); ``wanted`` may
    be a list, of which any one will do (some of the data a rule looks for: ``["1a7b3d", "secret key"]``)."""
    if isinstance(wanted, (list, tuple)):
        return any(mentions(value, kind, each) for each in wanted)
    target = normal(wanted, kind)
    if not target:
        return False
    for leaf in leaves(value):
        if not isinstance(leaf, str):
            continue
        if kind == "site":  # a site is mentioned where one of the text's URLs or bare hosts is on it
            if any(normal(word.rstrip(".,;:!?"), "site") == target
                   for word in re.findall(r"[^\s'\"<>()]+", leaf) if "." in word):
                return True
            continue
        if kind == "iban":
            text = re.sub(r"[\s-]", "", leaf).upper()
        elif kind == "text":
            text = _SPACE.sub(" ", leaf.casefold())
        elif kind == "phone":
            text = re.sub(r"\D", "", leaf)
        else:
            text = leaf.lower()
        if kind == "email":  # a whole address: not the tail of a longer one (bookmark@x.com is not mark@x.com)
            if re.search(rf"(?<![\w.+'-]){re.escape(target)}(?![\w-])", text):
                return True
        elif target in text:
            return True
    return False


FUNCTIONS: dict[str, Callable[..., Any]] = {"carries": carries, "mentions": mentions}
