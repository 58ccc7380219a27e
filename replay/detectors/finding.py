"""A finding: what a detector saw, where (node ids), and one sentence a person can read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Severity = Literal["info", "warning", "high"]


@dataclass(frozen=True)
class Finding:
    kind: str
    severity: Severity
    nodes: tuple[str, ...]
    sentence: str
    evidence: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "severity": self.severity,
            "nodes": list(self.nodes),
            "sentence": self.sentence,
            "evidence": self.evidence,
        }
