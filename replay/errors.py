"""The project's own errors: one root, one subclass per area.

Errors about bad input (:class:`InputError` and its subclasses) carry the file and the field, so the
CLI can print one line and exit 2; they also subclass ``ValueError``.
"""

from __future__ import annotations


class ReplayError(Exception):
    """Root of every error litmus-replay raises about itself."""


class InputError(ReplayError, ValueError):
    """Bad input: ``file`` and ``field`` say where, ``message`` says what is wrong and what to do."""

    def __init__(self, file: str | None, field: str | None, message: str):
        self.file = file
        self.field = field
        self.message = message
        super().__init__(self.line())

    def line(self) -> str:
        where = ": ".join(part for part in (self.file, self.field) if part)
        return f"{where}: {self.message}" if where else self.message


class TrajectoryError(InputError):
    """A trajectory in the native format does not parse or validate."""


class AdapterError(InputError):
    """A foreign trajectory file cannot be read by its adapter."""


class ScenarioError(InputError):
    """A scenario file (world, policy, trajectory, expectations) is malformed."""


class PolicyError(ScenarioError):
    """A policy rule does not compile."""


class UnknownName(ReplayError, LookupError):
    """A registry lookup failed; the message lists the valid names, or is ``failure``: the one line saying
    why the plug-in of that name failed to load."""

    def __init__(self, kind: str, name: str, valid: list[str], failure: str | None = None):
        self.kind = kind
        self.name = name
        self.valid = sorted(valid)
        self.failure = failure
        super().__init__(failure or f"unknown {kind} {name!r}; choose one of: {', '.join(self.valid)}")


class AdjudicationContextMismatch(ReplayError, RuntimeError):
    """Raised when a score would be computed across divergent contexts.

    ``reason`` is one of ``no_commit``, ``principal_diverged``, ``params_diverged``,
    ``verdict_flipped``.
    """

    def __init__(self, reason: str, message: str):
        self.reason = reason
        super().__init__(message)
