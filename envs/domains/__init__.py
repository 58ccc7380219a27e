"""The built-in domains; importing this package registers them."""

from __future__ import annotations

from typing import Any

from . import bank, files, profiles, records, shell  # noqa: F401

# Domains whose real semantics keep every bit of state in the server's memory or under the world root,
# which the next ``load`` rebuilds. A call to any other tool (a shell, a third-party domain) may leave
# files in /tmp or /dev/shm or processes behind, so a sandbox or container that ran one is not reused.
CONTAINED_DOMAINS = ("bank", "files", "profiles", "records")
_CONTAINED_TOOLS = frozenset(
    name for domain in (bank, files, profiles, records) for cls in vars(domain).values()
    if isinstance(cls, type) and getattr(cls, "name", None) in CONTAINED_DOMAINS for name in cls.tools
)


def is_contained_tool(tool: Any) -> bool:
    """Whether a tool's effects stay inside what a world reload rebuilds (see CONTAINED_DOMAINS)."""
    return tool in _CONTAINED_TOOLS
