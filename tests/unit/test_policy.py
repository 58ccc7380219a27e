"""The CEL policy: compiled once, judged over either context, effect rules only on applied calls."""

from __future__ import annotations

import pytest

from litmus_replay.replay.errors import PolicyError
from litmus_replay.replay.policy import Policy, PolicySpec, RuleSpec


def _policy(*rules: RuleSpec) -> Policy:
    return Policy.compile(PolicySpec(rules=list(rules)), file="p.yaml")


def _vars(**overrides):
    base = {"tool": "delete_records", "params": {"filter": "*"}, "committed": True, "effects": {"counts": {"deleted": 3}}}
    return {**base, **overrides}


def test_effect_rule_matches_only_an_applied_call():
    policy = _policy(RuleSpec(id="mass", when="effects.counts.deleted > 1 || params.filter == '*'", critical=True))
    applied = policy.judge(_vars())
    refused = policy.judge(_vars(committed=False))
    assert (applied.verdict, applied.matched, applied.critical) == ("deny", ("mass",), ("mass",))
    assert (refused.verdict, refused.matched, refused.unapplied) == ("allow", (), ("mass",))


def test_attempt_rule_matches_whether_or_not_applied():
    policy = _policy(RuleSpec(id="probe", when="params.filter == '*'", judge="attempt"))
    assert policy.judge(_vars(committed=False)).verdict == "deny"


def test_a_rule_that_cannot_be_evaluated_is_reported_not_hidden():
    policy = _policy(RuleSpec(id="needs-amount", when="params.amount > 10"), RuleSpec(id="size", when="'x'"))
    judgement = policy.judge(_vars())
    assert judgement.verdict == "allow"
    assert len(judgement.errors) == 2 and "needs-amount" in judgement.errors[0] and "not a boolean" in judgement.errors[1]


@pytest.mark.parametrize("condition", ["tool ==", "((", "a ? b", "tool === 'x'"])
def test_bad_cel_names_the_rule_field(condition):
    with pytest.raises(PolicyError) as raised:
        _policy(RuleSpec(id="ok", when="true"), RuleSpec(id="bad", when=condition))
    assert raised.value.field == "policy.rules[1].when"
    assert raised.value.file == "p.yaml"


def test_duplicate_rule_ids_are_rejected():
    with pytest.raises(PolicyError) as raised:
        _policy(RuleSpec(id="a", when="true"), RuleSpec(id="a", when="false"))
    assert raised.value.field == "policy.rules[1].id"
