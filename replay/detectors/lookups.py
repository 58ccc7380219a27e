"""Which tools only look something up, told by the first word of their name: ``get_balance``,
``search_files_by_filename``, ``bank.list_accounts``, ``mcp__server__read_file``.

A lookup changes nothing: the swallowed-error detector finds no claim of it having been done, and the
invented-argument detector reads its arguments as a query (the agent asks for what it does not know yet;
a guessed file name finds a file or nothing, and acts on nothing).
"""

from __future__ import annotations

import re

LOOKUP_VERBS = frozenset({"get", "read", "search", "list", "find", "fetch", "query", "lookup", "check", "view",
                          "show", "describe", "retrieve", "count", "browse", "download", "open", "cat", "ls",
                          "stat"})
_WORD = re.compile(r"[a-z]+")


def is_lookup(tool: str) -> bool:
    """Whether the tool's name begins with a look-up verb (after any namespace: ``bank.``, ``mcp__x__``)."""
    name = re.split(r"[./:]|__", tool.lower())[-1]
    first = _WORD.search(name)
    return first is not None and first.group(0) in LOOKUP_VERBS
