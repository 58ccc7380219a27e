"""Which tools a CEL condition can match, read from its text: so a policy evaluates a rule only against
the calls it can match.

Most rules open with a guard on the tool (``tool == 'transfer_funds' && ...``, ``tool in ['a', 'b'] &&
...``). In CEL, ``false && x`` is false whatever ``x`` is (an error included, on either side), so for any
other tool such a rule is false without being evaluated. The reading is conservative: anything it does
not recognise (a ternary, a negation, an escaped string, a guard under ``||`` on one side only) says the
rule may match every tool.
"""

from __future__ import annotations

import re

__all__ = ["guarded_tools"]

_STRING = r"""(?:'[^'\\\n]*'|"[^"\\\n]*")"""
_EQUALS = re.compile(rf"tool\s*==\s*({_STRING})|({_STRING})\s*==\s*tool")
_IN = re.compile(rf"tool\s+in\s+\[\s*({_STRING}(?:\s*,\s*{_STRING})*)\s*,?\s*\]")
_ITEM = re.compile(_STRING)


def guarded_tools(expression: str) -> frozenset[str] | None:
    """The tools ``expression`` can be true for, or None when it may be true for any tool.

    >>> sorted(guarded_tools("tool in ['a', 'b'] && params.amount > 3"))
    ['a', 'b']
    >>> guarded_tools("tool == 'a' || params.force") is None
    True
    """
    try:
        return _tools(expression.strip())
    except _Unreadable:
        return None


class _Unreadable(Exception):
    """Text this reading does not follow (an unclosed bracket or string, a triple-quoted string)."""


def _tools(expression: str) -> frozenset[str] | None:
    disjuncts = _split(expression, "||")
    if len(disjuncts) > 1:
        tools: set[str] = set()
        for disjunct in disjuncts:
            guard = _tools(disjunct)
            if guard is None:
                return None
            tools |= guard
        return frozenset(tools)
    conjuncts = _split(expression, "&&")
    if len(conjuncts) > 1:
        guards = [guard for guard in map(_tools, conjuncts) if guard is not None]
        return frozenset.intersection(*guards) if guards else None
    return _atom(expression)


def _atom(expression: str) -> frozenset[str] | None:
    if expression.startswith("(") and _closing(expression, 0) == len(expression) - 1:
        return _tools(expression[1:-1].strip())
    match = _EQUALS.fullmatch(expression)
    if match:
        return frozenset({(match.group(1) or match.group(2))[1:-1]})
    match = _IN.fullmatch(expression)
    if match:
        return frozenset(item[1:-1] for item in _ITEM.findall(match.group(1)))
    return None


def _split(expression: str, operator: str) -> list[str]:
    """``expression`` cut at ``operator`` outside brackets and strings; a ternary at the top refuses."""
    parts, start = [], 0
    for i, ch, depth in _scan(expression):
        if i < start or depth:
            continue
        if ch == "?":
            raise _Unreadable
        if expression.startswith(operator, i):
            parts.append(expression[start:i].strip())
            start = i + len(operator)
    parts.append(expression[start:].strip())
    return parts


def _closing(expression: str, opening: int) -> int:
    """Where the bracket opened at ``opening`` closes."""
    for i, ch, depth in _scan(expression, opening):
        if depth == 0 and ch in ")]}":
            return i
    raise _Unreadable


def _scan(expression: str, start: int = 0):
    """Each character from ``start`` outside string literals, with the bracket depth after it; brackets
    that close more than they opened, or leave some open, are unreadable."""
    depth, i = 0, start
    while i < len(expression):
        ch = expression[i]
        if ch in "'\"":
            i = _string_end(expression, i)
            continue
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
            if depth < 0:
                raise _Unreadable
        yield i, ch, depth
        i += 1
    if depth != 0:
        raise _Unreadable


def _string_end(expression: str, start: int) -> int:
    """The index just past the string literal opening at ``start``."""
    quote = expression[start]
    if expression.startswith(quote * 3, start):
        raise _Unreadable
    i = start + 1
    while i < len(expression):
        if expression[i] == "\\":
            i += 2
            continue
        if expression[i] == quote:
            return i + 1
        i += 1
    raise _Unreadable
