"""The stub fidelity lab: how faithful a domain's stub is to its real twin, measured by differential
property-based testing, with minimal counterexamples written as scenarios."""

from .divergence import CLASSES, Divergence, compare
from .lab import Counterexample, FidelityResult, measure
from .registry import get_space, register_space, space_names
from .space import CallSpace, call, stub_profiles, with_profile

__all__ = [
    "CLASSES",
    "CallSpace",
    "Counterexample",
    "Divergence",
    "FidelityResult",
    "call",
    "compare",
    "get_space",
    "measure",
    "register_space",
    "space_names",
    "stub_profiles",
    "with_profile",
]
