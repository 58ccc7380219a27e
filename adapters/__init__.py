"""Readers for the trajectory formats benchmarks write, each producing :mod:`litmus_replay.replay.model`.

Importing the package registers every built-in adapter; ``detect_format`` picks one by content.
"""

from ._build import DEFAULT_PRINCIPAL
from .base import (
    Adapter,
    Probe,
    adapter_names,
    detect_format,
    get_adapter,
    load_trajectories,
    register_adapter,
)

# Importing a module registers its adapter.
from . import native  # noqa: F401,E402
from . import agentdojo, anthropic, inspect_log, mcp, openai_chat, openai_responses, otel, tau2_bench, tau_bench  # noqa: F401,E402

__all__ = [
    "DEFAULT_PRINCIPAL",
    "Adapter",
    "Probe",
    "adapter_names",
    "detect_format",
    "get_adapter",
    "load_trajectories",
    "register_adapter",
]
