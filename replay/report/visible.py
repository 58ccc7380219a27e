"""Recorded strings made safe to print: every character that could steer a terminal or hide text shows
as an escape.

Trajectory ids, principals, tool names, verdict labels and finding texts come from files a hostile author
wrote. Printed raw, an ``ESC [`` sequence recolours or rewrites the screen, a bidi override reorders what
the reader sees, and a newline forges an extra report line; printed as rich markup, ``[/oops]`` crashes the
printer. So recorded text goes to the terminal through :func:`visible`, and into rich only as ``Text``.
"""

from __future__ import annotations

import re

__all__ = ["visible"]

# C0 and C1 controls, DEL, bidi embeddings, overrides and isolates, zero-width and line/paragraph
# separators, the byte-order mark, and lone surrogates (a truncated log, a file name that is not UTF-8).
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u206f\ufeff\ud800-\udfff]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: object) -> str:
    """``text`` as one line of plain characters: controls, bidi marks and lone surrogates escaped
    (``ESC`` shows as ``\\x1b``, a newline as ``\\n``, U+202E as ``\\u202e``)."""
    return _UNSAFE.sub(_escape, str(text))
