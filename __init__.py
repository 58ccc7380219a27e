"""litmus-replay: re-validate recorded AI-agent trajectories by replaying each tool call into a stub world
and a real, isolated world, and scoring it as a (proposal, commit) pair.

``litmus_replay.replay`` holds the replay, its reports and the ``litmus-replay`` command line (also
``python -m litmus_replay``), ``litmus_replay.envs`` the worlds and the runtimes they run in, and
``litmus_replay.adapters`` the readers of each benchmark's recorded runs. The Python API is re-exported
here: ``from litmus_replay import revalidate, replay_scenario, read_trajectories``. Importing this package
imports none of them, nor reads the installed metadata until ``__version__`` is asked for.
"""

# The Python API, from litmus_replay.replay.api (see its docstring for examples).
_API = (
    "Analysis", "BatchSummary", "InputError", "NoWorld", "ResultLine", "Scenario", "TaskWorld", "Trajectory",
    "analyse", "find_world", "load_scenario", "read_results", "read_trajectories", "replay_run", "replay_scenario",
    "revalidate",
)
__all__ = ["__version__", *_API]


def _installed_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("litmus-replay")
    except PackageNotFoundError:  # the source on sys.path without being installed
        return "0+unknown"


def __getattr__(name: str) -> object:
    """Names resolved on first use, so that ``import litmus_replay`` stays cheap."""
    if name == "__version__":
        global __version__
        __version__ = _installed_version()
        return __version__
    if name in _API:  # the Python API (litmus_replay.replay.api), imported on first use like the version
        from litmus_replay.replay import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
