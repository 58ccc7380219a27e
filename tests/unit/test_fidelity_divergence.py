"""Divergence classification: what an agent or a policy would notice between a stub's and a real outcome."""

from __future__ import annotations

from hypothesis import given, strategies as st

from litmus_replay.envs import Outcome
from litmus_replay.envs.outcome import Effects, Resolution
from litmus_replay.replay.fidelity import CLASSES, compare


def _outcome(status="ok", committed=True, output=None, code=None, principal="alice", params=None, changed=(),
             evidence=()):
    return Outcome(status=status, committed=committed, output=output, error_code=code,
                   effects=Effects(changed=tuple(changed)),
                   resolution=Resolution(principal, dict(params or {}), tuple(evidence)))


outcomes = st.builds(
    _outcome,
    status=st.sampled_from(["ok", "error", "pending"]),
    committed=st.booleans(),
    output=st.one_of(st.none(), st.integers(), st.text(max_size=3)),
    code=st.sampled_from([None, "403", "409"]),
    principal=st.sampled_from(["alice", "bob"]),
    params=st.dictionaries(st.sampled_from(["path", "id"]), st.sampled_from(["/a", "/w/../b", 1]), max_size=2),
    changed=st.lists(st.sampled_from(["r:1", "r:2"]), max_size=2, unique=True).map(sorted),
)


@given(outcomes)
def test_an_outcome_agrees_with_itself(outcome):
    assert compare(outcome, outcome) is None


@given(outcomes, outcomes)
def test_any_difference_is_classified_in_the_fixed_order(stub, real):
    divergence = compare(stub, real)
    if divergence is None:  # agreement: everything an agent or a policy sees is the same
        assert (stub.status, stub.status == "ok" and stub.committed, stub.error_code, stub.output, stub.effects) == (
            real.status, real.status == "ok" and real.committed, real.error_code, real.output, real.effects)
        if stub.status != "error":  # how far two failed calls got resolving is not compared
            assert stub.resolution == real.resolution
        return
    assert divergence.classes and all(cls in CLASSES for cls in divergence.classes)
    assert list(divergence.classes) == sorted(divergence.classes, key=CLASSES.index)
    assert divergence.kind


def test_a_real_refusal_of_what_the_stub_applied():
    divergence = compare(_outcome(changed=["r:1"]), _outcome("error", False, code="403"))
    assert divergence.primary == "refused_vs_applied" and "other_effects" in divergence.classes
    assert divergence.kind == "real refused 403"


def test_gate_and_idempotent_replay_have_their_own_kinds():
    assert compare(_outcome(changed=["r:1"]), _outcome("pending", False)).kind == "real held at a gate"
    assert compare(_outcome(changed=["r:1"]), _outcome("ok", False)).kind == "real replayed (idempotent)"


def test_principal_from_the_session_and_parameters_through_dotdot():
    session = compare(_outcome(), _outcome(principal="bob", evidence=["re-derived from ambient session token"]))
    assert session.classes == ("other_principal",) and session.kind == "other principal (ambient session)"
    dotted = compare(_outcome(params={"path": "/w/../b"}), _outcome(params={"path": "/b"}), {"path": "/w/../b"})
    assert dotted.primary == "other_parameters" and dotted.kind == "'..' resolution"


def test_a_failure_the_real_shell_went_on_from_is_a_masked_failure():
    stub = _outcome(output={"exit_code": 0})
    real = _outcome(output={"exit_code": 0}, evidence=["swallowed error: `false` exited 1"])
    assert compare(stub, real).kind == "masked shell failure"
