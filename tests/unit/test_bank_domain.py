"""The bank domain: real checks (rate limit, idempotency, ownership, funds, confirmation gate) and the stub's none."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from litmus_replay.envs import World, WorldSpecError

ACCOUNTS = {
    "acc-alice": {"owner": "alice", "balance": 1000},
    "acc-bob": {"owner": "bob", "balance": 50},
    "acc-alice-2": {"owner": "alice", "balance": 0},
}
SPEC: dict[str, Any] = {"principals": ["alice", "bob"], "bank": {"accounts": ACCOUNTS}}
GATED: dict[str, Any] = {**SPEC, "bank": {"accounts": ACCOUNTS, "confirm_above": 500}}
LIMITED: dict[str, Any] = {**SPEC, "bank": {"accounts": ACCOUNTS, "rate_limit": {"limit": 3, "window_seconds": 60}}}


def make_world(semantics: str, spec: dict[str, Any] = SPEC) -> World:
    return World(copy.deepcopy(spec), semantics)  # type: ignore[arg-type]


def call(world: World, tool: str, principal: str = "alice", at: float = 1.0, **params: Any) -> dict[str, Any]:
    return world.call({"tool": tool, "params": params, "principal": principal, "at": at})


def transfer(world: World, source: str, target: str, amount: Any, principal: str = "alice", at: float = 1.0, **extra: Any) -> dict[str, Any]:
    return call(world, "transfer_funds", principal, at, **{"from": source, "to": target, "amount": amount, **extra})


def balances(world: World) -> dict[str, Fraction]:
    return {key.split("/", 1)[1]: Fraction(value) for key, value in world.snapshot().items() if key.startswith("bank:account/")}


def assert_refused_unchanged(world: World, outcome: dict[str, Any], before: dict[str, str], code: str) -> None:
    assert outcome["status"] == "error"
    assert outcome["error_code"] == code
    assert outcome["committed"] is False
    assert outcome["effects"]["counts"]["total"] == 0
    assert world.snapshot() == before


@pytest.fixture(params=["stub", "real"])
def any_world(request: pytest.FixtureRequest):
    world = make_world(request.param)
    yield world
    world.close()


# ---- behaviour both semantics share --------------------------------------------------------------


def test_transfer_within_funds_completes_in_both(any_world: World) -> None:
    outcome = transfer(any_world, "acc-alice", "acc-bob", 100)
    assert outcome["status"] == "ok" and outcome["committed"] is True
    assert outcome["output"] == {"transfer_id": "txn-1", "status": "completed"}
    assert outcome["effects"]["changed"] == ["bank:account/acc-alice", "bank:account/acc-bob"]
    assert balances(any_world) == {"acc-alice": 900, "acc-bob": 150, "acc-alice-2": 0}
    resolution = outcome["resolution"]
    assert resolution["principal"] == "alice"
    assert resolution["resolved_params"] == {"from": "acc-alice", "to": "acc-bob", "amount": 100}


def test_unknown_account_is_404_in_both(any_world: World) -> None:
    before = any_world.snapshot()
    assert_refused_unchanged(any_world, transfer(any_world, "acc-alice", "acc-nobody", 1), before, "404")
    assert call(any_world, "get_balance", account="acc-nobody")["error_code"] == "404"


def test_own_balance_is_readable_in_both(any_world: World) -> None:
    outcome = call(any_world, "get_balance", account="acc-alice")
    assert outcome["output"] == {"account": "acc-alice", "balance": 1000}
    assert outcome["committed"] is True


def test_fractional_amounts_are_exact(any_world: World) -> None:
    transfer(any_world, "acc-alice", "acc-bob", 0.1)
    transfer(any_world, "acc-alice", "acc-bob", 0.2)
    assert call(any_world, "get_balance", account="acc-alice")["output"]["balance"] == 999.7
    assert balances(any_world)["acc-bob"] == Fraction("50.3")


def test_stub_and_real_start_from_the_same_snapshot() -> None:
    assert make_world("stub", GATED).snapshot() == make_world("real", GATED).snapshot()


# ---- real: ownership, amount, funds --------------------------------------------------------------


def test_real_transfer_from_a_foreign_account_is_403_and_moves_nothing() -> None:
    real = make_world("real")
    before = real.snapshot()
    outcome = transfer(real, "acc-bob", "acc-alice", 10)
    assert_refused_unchanged(real, outcome, before, "403")
    assert "owned by 'bob'" in outcome["resolution"]["evidence"][0]


def test_stub_transfer_from_a_foreign_account_moves_money() -> None:
    stub = make_world("stub")
    outcome = transfer(stub, "acc-bob", "acc-alice", 10)
    assert outcome["committed"] is True
    assert balances(stub)["acc-bob"] == 40


def test_real_balance_of_a_foreign_account_is_403() -> None:
    outcome = call(make_world("real"), "get_balance", account="acc-bob")
    assert outcome["error_code"] == "403" and outcome["output"] is None


def test_stub_balance_of_any_account_is_returned() -> None:
    assert call(make_world("stub"), "get_balance", account="acc-bob")["output"] == {"account": "acc-bob", "balance": 50}


@pytest.mark.parametrize("amount", [0, -5, "100", True, None, float("inf")])
def test_real_amount_must_be_a_positive_number(amount: Any) -> None:
    real = make_world("real")
    before = real.snapshot()
    assert_refused_unchanged(real, transfer(real, "acc-alice", "acc-bob", amount), before, "400")


def test_stub_moves_a_negative_amount_backwards() -> None:
    stub = make_world("stub")
    assert transfer(stub, "acc-alice", "acc-bob", -5)["committed"] is True
    assert balances(stub)["acc-bob"] == 45


def test_real_insufficient_funds_is_409_and_moves_nothing() -> None:
    real = make_world("real")
    before = real.snapshot()
    outcome = transfer(real, "acc-alice", "acc-bob", 1000.01)
    assert_refused_unchanged(real, outcome, before, "409")
    assert "insufficient funds" in outcome["resolution"]["evidence"][0]


def test_stub_lets_a_balance_go_negative() -> None:
    stub = make_world("stub")
    assert transfer(stub, "acc-bob", "acc-alice", 80, principal="bob")["committed"] is True
    assert balances(stub)["acc-bob"] == -30


# ---- real: the confirmation gate -----------------------------------------------------------------


def test_real_transfer_above_the_threshold_is_held_then_confirmed() -> None:
    real = make_world("real", GATED)
    before = balances(real)
    held = transfer(real, "acc-alice", "acc-bob", 600)
    assert held["status"] == "pending" and held["committed"] is False
    assert held["output"] == {"transfer_id": "txn-1", "status": "pending", "confirmation_id": "cnf-1"}
    assert balances(real) == before
    assert held["effects"]["created"] == ["bank:pending/cnf-1"] and held["effects"]["changed"] == []
    assert "pending confirmation cnf-1" in held["resolution"]["evidence"][0]

    confirmed = call(real, "confirm_transfer", confirmation_id="cnf-1")
    assert confirmed["status"] == "ok" and confirmed["committed"] is True
    assert confirmed["output"] == {"transfer_id": "txn-1", "status": "completed"}
    assert balances(real)["acc-alice"] == 400 and balances(real)["acc-bob"] == 650
    assert confirmed["effects"]["deleted"] == ["bank:pending/cnf-1"]
    assert confirmed["resolution"]["resolved_params"] == {
        "confirmation_id": "cnf-1",
        "transfer_id": "txn-1",
        "from": "acc-alice",
        "to": "acc-bob",
        "amount": 600,
    }


def test_real_amount_at_the_threshold_is_not_held() -> None:
    assert transfer(make_world("real", GATED), "acc-alice", "acc-bob", 500)["status"] == "ok"


def test_real_confirmation_ids_are_deterministic_counters() -> None:
    real = make_world("real", GATED)
    ids = [transfer(real, "acc-alice", "acc-bob", 501)["output"]["confirmation_id"] for _ in range(2)]
    assert ids == ["cnf-1", "cnf-2"]


def test_real_confirm_of_an_unknown_id_is_404() -> None:
    real = make_world("real", GATED)
    before = real.snapshot()
    assert_refused_unchanged(real, call(real, "confirm_transfer", confirmation_id="cnf-9"), before, "404")


def test_real_second_confirm_is_409() -> None:
    real = make_world("real", GATED)
    transfer(real, "acc-alice", "acc-bob", 600)
    call(real, "confirm_transfer", confirmation_id="cnf-1")
    before = real.snapshot()
    assert_refused_unchanged(real, call(real, "confirm_transfer", confirmation_id="cnf-1"), before, "409")


def test_real_confirm_by_another_principal_is_403() -> None:
    real = make_world("real", GATED)
    transfer(real, "acc-alice", "acc-bob", 600)
    before = real.snapshot()
    outcome = call(real, "confirm_transfer", principal="bob", confirmation_id="cnf-1")
    assert_refused_unchanged(real, outcome, before, "403")
    assert any("requested by 'alice'" in line for line in outcome["resolution"]["evidence"])


def test_real_confirm_rechecks_funds() -> None:
    real = make_world("real", GATED)
    transfer(real, "acc-alice", "acc-bob", 600)
    transfer(real, "acc-alice", "acc-alice-2", 500)
    before = real.snapshot()
    outcome = call(real, "confirm_transfer", confirmation_id="cnf-1")
    assert_refused_unchanged(real, outcome, before, "409")
    assert "bank:pending/cnf-1" in real.snapshot()  # still waiting at the gate


def test_stub_has_no_gate_and_confirms_anything() -> None:
    stub = make_world("stub", GATED)
    outcome = transfer(stub, "acc-alice", "acc-bob", 600)
    assert outcome["status"] == "ok" and outcome["committed"] is True
    assert balances(stub)["acc-bob"] == 650
    confirmed = call(stub, "confirm_transfer", confirmation_id="anything")
    assert confirmed["status"] == "ok" and confirmed["output"] == {"status": "completed"}
    assert confirmed["resolution"]["resolved_params"] == {"confirmation_id": "anything"}


# ---- real: idempotency keys ----------------------------------------------------------------------


def test_real_retry_with_the_same_key_moves_no_money_and_repeats_the_output() -> None:
    real = make_world("real")
    first = transfer(real, "acc-alice", "acc-bob", 100, idempotency_key="k1")
    after_first = real.snapshot()
    retry = transfer(real, "acc-alice", "acc-bob", 100, idempotency_key="k1", at=2.0)
    assert retry["status"] == "ok" and retry["committed"] is False
    assert retry["output"] == first["output"]
    assert retry["effects"]["counts"]["total"] == 0
    assert real.snapshot() == after_first
    assert balances(real)["acc-bob"] == 150
    assert retry["resolution"]["evidence"] == [
        "idempotency key k1 already used by transfer txn-1; returned its first result"
    ]
    assert "bank:idempotency/k1" in first["effects"]["created"]


def test_real_same_key_with_different_params_is_409() -> None:
    real = make_world("real")
    transfer(real, "acc-alice", "acc-bob", 100, idempotency_key="k1")
    before = real.snapshot()
    assert_refused_unchanged(real, transfer(real, "acc-alice", "acc-bob", 101, idempotency_key="k1"), before, "409")


def test_real_failed_transfer_does_not_burn_its_key() -> None:
    real = make_world("real")
    assert transfer(real, "acc-alice", "acc-bob", 5000, idempotency_key="k1")["error_code"] == "409"
    assert transfer(real, "acc-alice", "acc-bob", 100, idempotency_key="k1")["committed"] is True


def test_stub_retry_with_the_same_key_moves_money_twice() -> None:
    stub = make_world("stub")
    first = transfer(stub, "acc-alice", "acc-bob", 100, idempotency_key="k1")
    retry = transfer(stub, "acc-alice", "acc-bob", 100, idempotency_key="k1")
    assert first["committed"] is True and retry["committed"] is True
    assert balances(stub)["acc-bob"] == 250


# ---- real: the rate limit ------------------------------------------------------------------------


def test_real_rate_limit_refuses_after_the_limit_and_allows_again_after_the_window() -> None:
    real = make_world("real", LIMITED)
    for at in (1.0, 2.0, 3.0):
        assert transfer(real, "acc-alice", "acc-bob", 10, at=at)["committed"] is True
    before = real.snapshot()
    refused = transfer(real, "acc-alice", "acc-bob", 10, at=30.0)
    assert_refused_unchanged(real, refused, before, "429")
    assert "rate limit" in refused["resolution"]["evidence"][0]
    assert transfer(real, "acc-alice", "acc-bob", 10, at=60.5)["error_code"] == "429"  # t=1 still inside (0.5, 60.5]
    allowed = transfer(real, "acc-alice", "acc-bob", 10, at=61.0)
    assert allowed["committed"] is True
    assert balances(real)["acc-bob"] == 90


def test_real_rate_limit_is_per_principal_and_counts_refused_transfers() -> None:
    real = make_world("real", LIMITED)
    for at in (1.0, 2.0, 3.0):
        transfer(real, "acc-bob", "acc-alice", 10, at=at)  # 403s, but attempts nonetheless
    assert transfer(real, "acc-alice", "acc-bob", 10, at=4.0)["error_code"] == "429"
    assert transfer(real, "acc-bob", "acc-alice", 10, principal="bob", at=4.0)["committed"] is True


def test_stub_has_no_rate_limit() -> None:
    stub = make_world("stub", LIMITED)
    outcomes = [transfer(stub, "acc-alice", "acc-bob", 10, at=1.0 + i) for i in range(6)]
    assert all(outcome["committed"] for outcome in outcomes)
    assert balances(stub)["acc-bob"] == 110


# ---- the world spec ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "section, field",
    [
        ({"accounts": {"a": {"owner": "x", "balance": "lots"}}}, "world.bank.accounts.a.balance"),
        ({"accounts": {"a": {"balance": 1}}}, "world.bank.accounts.a.owner"),
        ({"accounts": {"a": {"owner": "x", "colour": 1}}}, "world.bank.accounts.a.colour"),
        ({"accounts": ["a"]}, "world.bank.accounts"),
        ({"confirm_above": "500"}, "world.bank.confirm_above"),
        ({"rate_limit": {"limit": -1, "window_seconds": 60}}, "world.bank.rate_limit.limit"),
        ({"rate_limit": {"limit": 3, "window_seconds": 0}}, "world.bank.rate_limit.window_seconds"),
        ({"rate_limit": {"limit": 3, "window": 60}}, "world.bank.rate_limit.window"),
        ({"ledger": {}}, "world.bank.ledger"),
    ],
)
@pytest.mark.parametrize("semantics", ["stub", "real"])
def test_malformed_bank_spec_names_the_field(section: dict[str, Any], field: str, semantics: str) -> None:
    with pytest.raises(WorldSpecError) as info:
        make_world(semantics, {"bank": section})
    assert info.value.field == field


# ---- property: real money is conserved and never negative ----------------------------------------

NAMES = sorted(ACCOUNTS)
amounts = st.one_of(
    st.integers(min_value=-100, max_value=1500),
    st.decimals(min_value=-10, max_value=1500, places=2, allow_nan=False).map(float),
    st.floats(min_value=1e-9, max_value=2000, allow_nan=False),
)


class RealBankMachine(RuleBasedStateMachine):
    """Any sequence of transfers, confirmations and retries keeps real balances non-negative and the total fixed."""

    @initialize(gate=st.one_of(st.none(), st.integers(0, 800)), limit=st.one_of(st.none(), st.integers(0, 4)))
    def start(self, gate: int | None, limit: int | None) -> None:
        bank: dict[str, Any] = {"accounts": ACCOUNTS}
        if gate is not None:
            bank["confirm_above"] = gate
        if limit is not None:
            bank["rate_limit"] = {"limit": limit, "window_seconds": 5}
        self.world = make_world("real", {**SPEC, "bank": bank})
        self.total = sum(balances(self.world).values())
        self.clock = 0.0
        self.confirmations: list[str] = []

    def teardown(self) -> None:
        if hasattr(self, "world"):
            self.world.close()

    def _tick(self, step: float) -> float:
        self.clock += step
        return self.clock

    @rule(
        source=st.sampled_from(NAMES),
        dest=st.sampled_from(NAMES),
        amount=amounts,
        principal=st.sampled_from(["alice", "bob"]),
        key=st.one_of(st.none(), st.sampled_from(["k1", "k2"])),
        step=st.sampled_from([0.0, 1.0, 6.0]),
    )
    def send(self, source: str, dest: str, amount: Any, principal: str, key: str | None, step: float) -> None:
        extra = {} if key is None else {"idempotency_key": key}
        outcome = transfer(self.world, source, dest, amount, principal=principal, at=self._tick(step), **extra)
        if outcome["status"] == "pending":
            self.confirmations.append(outcome["output"]["confirmation_id"])
        if not outcome["committed"]:
            assert not any(name.startswith("bank:account/") for name in outcome["effects"]["changed"])

    @precondition(lambda self: bool(self.confirmations))
    @rule(data=st.data(), principal=st.sampled_from(["alice", "bob"]))
    def confirm(self, data: st.DataObject, principal: str) -> None:
        cid = data.draw(st.sampled_from(self.confirmations))
        call(self.world, "confirm_transfer", principal=principal, at=self._tick(1.0), confirmation_id=cid)

    @invariant()
    def never_negative(self) -> None:
        assert all(balance >= 0 for balance in balances(self.world).values())

    @invariant()
    def conserved(self) -> None:
        assert sum(balances(self.world).values()) == self.total


RealBankMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=25, suppress_health_check=[HealthCheck.too_slow])
TestRealBank = pytest.mark.slow(RealBankMachine.TestCase)

