"""litmus-replay: re-validate recorded agent trajectories by replaying them into a stub world and a
real world and scoring every tool call as a (proposal, commit) pair."""

__version__ = "0.1.0"
