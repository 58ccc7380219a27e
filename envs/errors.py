"""Errors raised inside a world.

Domains fail like the real thing: file operations raise built-in ``OSError`` with an errno, services
raise :class:`ServiceError` with an HTTP-like status. The world turns both into an error outcome, so a
stub and a real world fail the same way where they agree.
"""

from __future__ import annotations


class EnvError(Exception):
    """Root of the errors this package raises about itself (not tool failures)."""


class WorldLost(EnvError):
    """The world stopped answering (a call outlived its time limit, its server died): every later call to
    it fails too, so a caller that wants them answered builds the world again."""


class WorldSpecError(EnvError, ValueError):
    """A world description is malformed; ``field`` is the dotted path of the offending field."""

    def __init__(self, field: str, message: str):
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")


class UnknownTool(EnvError, LookupError):
    """A call names a tool no domain provides."""

    def __init__(self, tool: str, valid: list[str]):
        self.tool = tool
        self.valid = sorted(valid)
        super().__init__(f"unknown tool {tool!r}; known tools: {', '.join(self.valid)}")


class UnknownDomain(EnvError, LookupError):
    """A world names a domain that is not registered; ``failure``, when given, is the one line saying why
    the plug-in of that name failed to load, and is the message."""

    def __init__(self, domain: str, valid: list[str], failure: str | None = None):
        self.domain = domain
        self.valid = sorted(valid)
        self.failure = failure
        super().__init__(failure or f"unknown domain {domain!r}; known domains: {', '.join(self.valid)}")


class ServiceError(EnvError):
    """A service refused a call with an HTTP-like status (403, 404, 409, 429, ...)."""

    def __init__(self, status: int, message: str):
        self.status = status
        self.message = message
        super().__init__(f"{status}: {message}")


class Unresolvable(ServiceError):
    """The world could not resolve who acts or on what, so the call has no commit context."""


class DomainFault(EnvError):
    """A domain's tool failed in a way no tool should (a bug, not a refusal): the call has no outcome."""

    def __init__(self, domain: str, tool: str, error: BaseException):
        self.domain = domain
        self.tool = tool
        detail = str(error).splitlines()[0] if str(error) else ""
        super().__init__(f"domain {domain!r}, tool {tool!r}: {type(error).__name__}{': ' + detail if detail else ''}")


class RuntimeUnavailable(EnvError, RuntimeError):
    """A runtime cannot run on this machine; the message names the alternatives."""
