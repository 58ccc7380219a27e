"""What one call did: the outcome, its effects (a state diff) and its resolution context.

These are plain dataclasses that convert to and from JSON-shaped dicts, because outcomes cross the
boundary between an env server and the host as versioned JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

from .values import delta

Status = Literal["ok", "error", "pending"]

# A snapshot maps a resource id ("records:row/3", "files:/workspace/a.txt") to a digest of its state.
Snapshot = Mapping[str, str]

# At most this many resources of one call carry values; the ids and counts stay complete.
MAX_VALUES = 256


@dataclass(frozen=True)
class Effects:
    """The state diff of one call: resource ids created, changed and deleted, and what their values were.

    ``values`` maps an affected resource id to ``{"before", "after"}`` (None where the resource did not
    exist) and, where numbers moved, ``"delta"`` (see :func:`.values.delta`): the amount a transfer moved
    out of an account, a field's old and new value, a file's size and digest before and after. Values are
    bounded previews (:mod:`.values`); a domain that gives none leaves its resources out.
    """

    created: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    values: Mapping[str, Mapping[str, Any]] = field(default_factory=dict, compare=True, hash=False)
    # Why the world saw only part of its state around the call (a snapshot bounded by its entry count or
    # the kernel's path limit): these effects are what was seen, and more may have happened.
    unobserved: str | None = None

    @classmethod
    def between(cls, before: Snapshot, after: Snapshot) -> "Effects":
        """Diff two snapshots of the same domain."""
        if before == after:  # most calls change nothing: one comparison instead of three passes
            return _NO_EFFECTS
        return cls(
            created=tuple(sorted(k for k in after if k not in before)),
            changed=tuple(sorted(k for k in after if k in before and before[k] != after[k])),
            deleted=tuple(sorted(k for k in before if k not in after)),
        )

    def with_values(self, before: Mapping[str, Any], after: Mapping[str, Any]) -> "Effects":
        """These effects with the values of what they touched, from the values before and after the call."""
        values: dict[str, dict[str, Any]] = {}
        for key in self.affected[:MAX_VALUES]:
            if key not in before and key not in after:
                continue
            entry = {"before": before.get(key), "after": after.get(key)}
            moved = delta(entry["before"], entry["after"])
            if moved is not None:
                entry["delta"] = moved
            values[key] = entry
        return Effects(self.created, self.changed, self.deleted, values, self.unobserved)

    @property
    def affected(self) -> tuple[str, ...]:
        """Every resource id the call created, changed or deleted, sorted."""
        return tuple(sorted((*self.created, *self.changed, *self.deleted)))

    @property
    def empty(self) -> bool:
        return not (self.created or self.changed or self.deleted)

    def to_dict(self) -> dict[str, Any]:
        return {
            "created": list(self.created),
            "changed": list(self.changed),
            "deleted": list(self.deleted),
            "counts": {
                "created": len(self.created),
                "changed": len(self.changed),
                "deleted": len(self.deleted),
                "total": len(self.created) + len(self.changed) + len(self.deleted),
            },
            "values": {key: dict(entry) for key, entry in self.values.items()},
            **({"unobserved": self.unobserved} if self.unobserved else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Effects":
        return cls(
            created=tuple(data.get("created", ())),
            changed=tuple(data.get("changed", ())),
            deleted=tuple(data.get("deleted", ())),
            values=dict(data.get("values") or {}),
            unobserved=data.get("unobserved"),
        )


_NO_EFFECTS = Effects()


@dataclass(frozen=True)
class Resolution:
    """Who acted and on what, as the world resolved it, and the evidence of how."""

    principal: str
    resolved_params: dict[str, Any]
    evidence: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "principal": self.principal,
            "resolved_params": self.resolved_params,
            "evidence": list(self.evidence),
            "reads": list(self.reads),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Resolution":
        return cls(
            principal=data["principal"],
            resolved_params=dict(data["resolved_params"]),
            evidence=tuple(data.get("evidence", ())),
            reads=tuple(data.get("reads", ())),
        )


@dataclass(frozen=True)
class Outcome:
    """What one call did in one world.

    ``committed`` says whether the world applied the call: a refusal (403, 409, 429), a gate left
    pending, an idempotent replay or a timeout commits nothing. ``resolution`` is ``None`` when the
    world could not resolve who acts or on what.
    """

    status: Status
    committed: bool
    output: Any = None
    error_code: str | None = None
    error: str | None = None
    effects: Effects = field(default_factory=Effects)
    resolution: Resolution | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "committed": self.committed,
            "output": self.output,
            "error_code": self.error_code,
            "error": self.error,
            "effects": self.effects.to_dict(),
            "resolution": self.resolution.to_dict() if self.resolution else None,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Outcome":
        resolution = data.get("resolution")
        return cls(
            status=data["status"],
            committed=data["committed"],
            output=data.get("output"),
            error_code=data.get("error_code"),
            error=data.get("error"),
            effects=Effects.from_dict(data.get("effects") or {}),
            resolution=Resolution.from_dict(resolution) if resolution else None,
        )
