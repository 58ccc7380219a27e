"""The policy: misuse rules with CEL conditions, compiled once, judged over either context.

A rule describes misuse. It matches when its ``when`` condition is true; ``judge: effect`` (the default)
rules judge what a call did, so they match only a call its world applied — a refused call, a gate left
pending or an idempotent replay did nothing, and that is exactly how the proposal and commit verdicts come
apart. ``judge: attempt`` rules judge the attempt itself, applied or not. A rule marked ``critical`` names a
critical decision node. Conditions are evaluated by a real CEL implementation; nothing is ``eval``-ed.

Variables a condition sees:

``tool``, ``params`` (as proposed), ``resolved`` (as this context resolved them), ``principal`` (who
acted in this context), ``declared_principal``, ``status`` (``ok``/``error``/``pending``),
``error_code``, ``committed``, ``effects`` (``created``/``changed``/``deleted`` lists and ``counts``),
``output``, ``history`` (earlier calls in the same world: ``key``, ``tool``, ``params``, ``resolved``,
``principal``, ``status``, ``committed``), and ``world`` (the world's ``facts`` plus ``principals``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal, Mapping

import cel
from pydantic import BaseModel, ConfigDict, Field

from .errors import PolicyError

Verdict = Literal["allow", "deny"]


class RuleSpec(BaseModel):
    """One misuse rule as written in a scenario or worlds file."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(..., min_length=1)
    when: str = Field(..., min_length=1, description="CEL condition; true means misuse.")
    judge: Literal["effect", "attempt"] = Field(
        "effect", description="effect: match only calls the world applied; attempt: match any call."
    )
    critical: bool = False
    description: str = ""


class PolicySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rules: list[RuleSpec] = Field(default_factory=list)


@dataclass(frozen=True)
class Judgement:
    """The policy's verdict on one call in one context, with the rules that decided it."""

    verdict: Verdict
    matched: tuple[str, ...] = ()
    critical: tuple[str, ...] = ()
    unapplied: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "matched": list(self.matched),
            "critical": list(self.critical),
            "unapplied": list(self.unapplied),
            "errors": list(self.errors),
        }


@dataclass(frozen=True)
class _Rule:
    spec: RuleSpec
    program: Any


@dataclass
class Policy:
    """Compiled misuse rules."""

    rules: list[_Rule] = field(default_factory=list)

    @classmethod
    def compile(cls, spec: PolicySpec, file: str | None = None, field_prefix: str = "policy") -> "Policy":
        """Compile every condition once; a condition that does not parse raises :class:`PolicyError`."""
        rules = []
        seen: set[str] = set()
        for index, rule in enumerate(spec.rules):
            where = f"{field_prefix}.rules[{index}]"
            if rule.id in seen:
                raise PolicyError(file, f"{where}.id", f"duplicate rule id {rule.id!r}")
            seen.add(rule.id)
            try:
                program = cel.compile(rule.when)
            except (ValueError, RuntimeError, TypeError) as exc:
                first_line = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                raise PolicyError(file, f"{where}.when", f"CEL does not compile: {first_line}") from None
            rules.append(_Rule(rule, program))
        return cls(rules)

    @property
    def uses_history(self) -> bool:
        """Whether any condition reads ``history`` (building it costs time linear in the trajectory)."""
        return any(re.search(r"\bhistory\b", rule.spec.when) for rule in self.rules)

    @property
    def critical_rules(self) -> list[str]:
        return [rule.spec.id for rule in self.rules if rule.spec.critical]

    def judge(self, variables: Mapping[str, Any]) -> Judgement:
        """Evaluate every rule over one context's variables; any match means ``deny``.

        ``unapplied`` lists the effect rules whose condition held for a call the world did not apply:
        the misuse the call would have been, had it gone through.
        """
        matched: list[str] = []
        critical: list[str] = []
        unapplied: list[str] = []
        errors: list[str] = []
        applied = bool(variables.get("committed"))
        context = cel.Context(dict(variables))  # converted to CEL once, shared by every rule
        for rule in self.rules:
            try:
                result = rule.program.execute(context)
            except Exception as exc:  # the CEL library raises KeyError/TypeError/RuntimeError alike
                errors.append(f"rule {rule.spec.id!r} could not be evaluated: {type(exc).__name__}: {exc}")
                continue
            if not isinstance(result, bool):
                errors.append(f"rule {rule.spec.id!r} returned {type(result).__name__}, not a boolean")
                continue
            if result and rule.spec.judge == "effect" and not applied:
                unapplied.append(rule.spec.id)
            elif result:
                matched.append(rule.spec.id)
                if rule.spec.critical:
                    critical.append(rule.spec.id)
        return Judgement("deny" if matched else "allow", tuple(matched), tuple(critical), tuple(unapplied), tuple(errors))
