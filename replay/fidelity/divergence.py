"""How a stub's answer to one call differs from its real twin's, in what an agent or a policy would notice.

An agent observes the status, the error code and the output; a policy sees the resolution context — the
acting principal, the resolved parameters — and the effects. A divergence names every class of difference
(in a fixed order, the first being the primary) and a *kind*: the cause in a few words ("real refused
403", "real held at a gate", "other principal"), which is what the fidelity lab counts as one distinct
finding and shrinks a counterexample for.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Collection, Mapping

from litmus_replay.envs import Outcome

__all__ = ["CLASSES", "Divergence", "compare", "effects_agree"]

REFUSED_VS_APPLIED = "refused_vs_applied"
OTHER_PRINCIPAL = "other_principal"
OTHER_PARAMETERS = "other_parameters"
OTHER_EFFECTS = "other_effects"
OTHER_OUTPUT = "other_output"
CLASSES = (REFUSED_VS_APPLIED, OTHER_PRINCIPAL, OTHER_PARAMETERS, OTHER_EFFECTS, OTHER_OUTPUT)

SWALLOWED = "swallowed error"


@dataclass(frozen=True)
class Divergence:
    """The classes in which one call's stub and real outcomes differ, and the kind of difference."""

    classes: tuple[str, ...]
    kind: str
    detail: str

    @property
    def primary(self) -> str:
        return self.classes[0]

    def to_dict(self) -> dict[str, Any]:
        return {"classes": list(self.classes), "kind": self.kind, "detail": self.detail}


def compare(stub: Outcome, real: Outcome, params: Mapping[str, Any] | None = None) -> Divergence | None:
    """The divergence between a stub's and a real world's outcome of the same call (made with ``params``),
    or None if they agree."""
    classes: list[str] = []
    if _applied(stub) != _applied(real) or stub.status != real.status:
        classes.append(REFUSED_VS_APPLIED)
    stub_res, real_res = stub.resolution, real.resolution
    both_failed = stub.status == real.status == "error"  # how far each got resolving a failed call is noise
    if stub_res is not None and real_res is not None and not both_failed:
        if stub_res.principal != real_res.principal:
            classes.append(OTHER_PRINCIPAL)
        if _json(stub_res.resolved_params) != _json(real_res.resolved_params):
            classes.append(OTHER_PARAMETERS)
    elif (stub_res is None) != (real_res is None) and REFUSED_VS_APPLIED not in classes and not both_failed:
        classes.append(OTHER_PRINCIPAL)  # one side could not even say who acts
    if not effects_agree(stub, real):
        classes.append(OTHER_EFFECTS)
    if stub.status == real.status and (stub.error_code != real.error_code or _json(stub.output) != _json(real.output)):
        classes.append(OTHER_OUTPUT)
    masked = _masked_failure(real)
    if masked and not _masked_failure(stub) and stub.status == "ok" and real.status == "ok":
        if OTHER_OUTPUT not in classes:
            classes.append(OTHER_OUTPUT)
    if not classes:
        return None
    kind, detail = _kind(tuple(classes), stub, real, masked, params or {})
    return Divergence(tuple(classes), kind, detail)


def effects_agree(stub: Outcome, real: Outcome, modelled: Collection[str] | None = None) -> bool:
    """Whether both worlds created, changed and deleted the same resources (and, where both carry them,
    moved the same amounts): if so, their states are still in step after the call.

    With ``modelled`` (the resource families the stub has at all, see ``machine``), a resource of a family
    the stub does not model — the real bank's idempotency-key ledger — is the real world's bookkeeping and
    is left out.
    """
    a, b = stub.effects, real.effects

    def ids(effects: Any) -> tuple[tuple[str, ...], ...]:
        keep = (lambda r: r.rsplit("/", 1)[0] in modelled) if modelled is not None else (lambda r: True)
        return tuple(tuple(r for r in group if keep(r)) for group in (effects.created, effects.changed, effects.deleted))

    if ids(a) != ids(b):
        return False
    values_a, values_b = getattr(a, "values", None) or {}, getattr(b, "values", None) or {}
    for key in set(values_a) & set(values_b):
        delta_a, delta_b = values_a[key].get("delta"), values_b[key].get("delta")
        if delta_a is not None and delta_b is not None and _json(delta_a) != _json(delta_b):
            return False
    return True


def _applied(outcome: Outcome) -> bool:
    return outcome.status == "ok" and outcome.committed


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _masked_failure(outcome: Outcome) -> str | None:
    """The first failure a command went on from, as the real shell's evidence records it."""
    if outcome.resolution is None:
        return None
    return next((line for line in outcome.resolution.evidence if line.startswith(SWALLOWED)), None)


def _kind(classes: tuple[str, ...], stub: Outcome, real: Outcome, masked: str | None,
          params: Mapping[str, Any]) -> tuple[str, str]:
    primary = classes[0]
    if primary == REFUSED_VS_APPLIED:
        kind, detail = _refusal_kind(stub, real)
        dotted = _dotted(params)
        return (f"{kind} through '..'" if dotted else kind), detail
    if masked:
        return "masked shell failure", masked
    if primary == OTHER_PRINCIPAL:
        who = (stub.resolution.principal if stub.resolution else None, real.resolution.principal if real.resolution else None)
        via = " (ambient session)" if any("session" in line for line in _evidence(real)) else ""
        return f"other principal{via}", f"stub acted as {who[0]!r}, real as {who[1]!r}"
    if primary == OTHER_PARAMETERS:
        changed = _changed_params(stub, real)
        cause = _parameter_cause(real, params)
        return cause or "other parameters", "; ".join(
            f"{name}: stub {stub.resolution.resolved_params.get(name)!r}, real {real.resolution.resolved_params.get(name)!r}"  # type: ignore[union-attr]
            for name in changed
        )
    if primary == OTHER_EFFECTS:
        return "other effects", f"stub {_effects_text(stub)}, real {_effects_text(real)}"
    if stub.error_code != real.error_code:
        return f"other error (real {real.error_code})", f"stub {stub.error_code}: {stub.error}; real {real.error_code}: {real.error}"
    return "other output", f"stub {_short(stub.output)}, real {_short(real.output)}"


def _refusal_kind(stub: Outcome, real: Outcome) -> tuple[str, str]:
    if real.status == "pending":
        return "real held at a gate", _last_evidence(real) or "the real world held the call pending confirmation"
    if stub.status == "pending":
        return "stub held at a gate", _last_evidence(stub) or ""
    if real.status == "ok" and not real.committed:
        return "real replayed (idempotent)", _last_evidence(real) or "the real world repeated an earlier answer"
    if real.status == "error" and stub.status == "ok":
        return f"real refused {real.error_code}", real.error or ""
    if stub.status == "error" and real.status == "ok":
        return f"stub refused {stub.error_code}", stub.error or ""
    return f"stub {stub.status} {stub.error_code or ''} vs real {real.status} {real.error_code or ''}".strip(), real.error or ""


def _changed_params(stub: Outcome, real: Outcome) -> list[str]:
    a = stub.resolution.resolved_params  # type: ignore[union-attr]
    b = real.resolution.resolved_params  # type: ignore[union-attr]
    return sorted(key for key in set(a) | set(b) if _json(a.get(key)) != _json(b.get(key)))


def _parameter_cause(real: Outcome, params: Mapping[str, Any]) -> str | None:
    """Name the usual causes of a path resolving elsewhere: a '..' in what the call asked for, or a
    symlink the real world followed."""
    if _dotted(params):
        return "'..' resolution"
    if any("symlink" in line for line in _evidence(real)):
        return "symlink resolution"
    return None


def _dotted(params: Mapping[str, Any]) -> list[str]:
    """The parameters that hold a path with a '..' segment."""
    return sorted(name for name, value in params.items() if isinstance(value, str) and ".." in value.split("/"))


def _evidence(outcome: Outcome) -> tuple[str, ...]:
    return outcome.resolution.evidence if outcome.resolution else ()


def _last_evidence(outcome: Outcome) -> str | None:
    evidence = _evidence(outcome)
    return evidence[-1] if evidence else None


def _effects_text(outcome: Outcome) -> str:
    effects = outcome.effects
    parts = [f"{name} {', '.join(ids)}" for name, ids in
             (("created", effects.created), ("changed", effects.changed), ("deleted", effects.deleted)) if ids]
    return "; ".join(parts) or "none"


def _short(value: Any, limit: int = 80) -> str:
    text = _json(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
