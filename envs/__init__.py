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
    WorldSpecError,
)
from .outcome import Effects, Outcome, Resolution
from .world import World

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
    "WorldSpecError",
]
