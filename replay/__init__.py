"""litmus-replay: re-validate recorded agent trajectories by replaying them into a stub world and a
real world and scoring every tool call as a (proposal, commit) pair."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("litmus-replay")  # the distribution's, one place: pyproject.toml
except PackageNotFoundError:  # the source on sys.path without being installed
    __version__ = "0+unknown"
