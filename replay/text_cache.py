"""Remembering what a function makes of a text, for the texts that come back run after run (a tool's
answer, a user's prompt), without keeping long ones: a text longer than ``longest`` is worked out each time."""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

__all__ = ["remembered_by_text"]

T = TypeVar("T")


def remembered_by_text(maxsize: int, longest: int = 32768) -> Callable[[Callable[[str], T]], Callable[[str], T]]:
    """Decorate a pure function of one text with an LRU cache of ``maxsize`` texts of at most ``longest``
    characters (the value is shared between callers: they only read it)."""
    def decorate(function: Callable[[str], T]) -> Callable[[str], T]:
        cached = functools.lru_cache(maxsize=maxsize)(function)

        @functools.wraps(function)
        def read(text: str) -> T:
            return function(text) if len(text) > longest else cached(text)

        read.cache_clear = cached.cache_clear  # type: ignore[attr-defined]
        return read
    return decorate
