"""Doctest examples in docstrings, shown as Python console blocks in the API reference.

A docstring's ``>>>`` lines are doctests, which the test suite runs. Markdown would read them as nested
quotes, so before a docstring is rendered each doctest block (a ``>>>`` line and the lines after it up to
a blank line, as doctest reads it) is fenced as ``pycon``. Named in ``mkdocs.yml`` as a griffe extension of the API reference.
"""

from __future__ import annotations

from typing import Any

import griffe


def fence_doctests(text: str) -> str:
    """The docstring with every doctest block outside a fenced block fenced as ``pycon``."""
    lines: list[str] = []
    block: list[str] = []
    fenced = False
    for line in text.splitlines():
        if block:
            if line.strip():
                block.append(line)
                continue
            lines += ["```pycon", *block, "```"]
            block = []
        if line.lstrip().startswith("```"):
            fenced = not fenced
        elif not fenced and line.lstrip().startswith(">>>"):
            block = [line]
            continue
        lines.append(line)
    if block:
        lines += ["```pycon", *block, "```"]
    return "\n".join(lines)


class DoctestBlocks(griffe.Extension):
    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)
