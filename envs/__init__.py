"""Stateful tool worlds with stub and real semantics.

Everything under this package runs inside a sandbox or a container, so it imports only the standard
library (and pyfakefs, for stub file semantics) and speaks JSON-shaped dicts at its edges.
"""

from .errors import (
    DomainFault,
    EnvError,
    RuntimeUnavailable,
    ServiceError,
    UnknownDomain,
    UnknownTool,
    Unresolvable,
    WorldLost,
    WorldSpecError,
)

_LAZY = {"Effects": "outcome", "Outcome": "outcome", "Resolution": "outcome", "World": "world"}


def __getattr__(name: str):
    # The env server imports this package first: importing the world (every domain) only when asked for
    # lets a sandbox answer its first message without it.
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


__all__ = [
    "DomainFault",
    "Effects",
    "EnvError",
    "Outcome",
    "Resolution",
    "RuntimeUnavailable",
    "ServiceError",
    "UnknownDomain",
    "UnknownTool",
    "Unresolvable",
    "World",
    "WorldLost",
    "WorldSpecError",
]
