"""Readers for the trajectory formats benchmarks write, each producing :mod:`litmus_replay.replay.model`."""

from .base import Adapter, adapter_names, get_adapter, load_trajectories, register_adapter
from . import native  # noqa: F401  (registers the native format)

__all__ = ["Adapter", "adapter_names", "get_adapter", "load_trajectories", "register_adapter"]
