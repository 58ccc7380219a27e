"""Bank: accounts with owners and balances, moved by transfers.

Stub: the harness's view — a transfer moves the money at once, with no checks at all: balances may go
negative, there is no confirmation gate and no rate limit, and idempotency keys are ignored (a retry
moves the money twice).
Profile ``checked`` (``stub_profile: checked``): a stub that refuses another's account (403) and short funds
(409), still without gate, rate limit or idempotency keys.
Real: a transfer passes, in order, a per-principal rate limit, an idempotency-key check, ownership and
funds checks and a confirmation gate above a threshold; a refused or held transfer moves no money.

Money is kept as exact fractions (a float amount is read as the decimal it prints as), so balances are
conserved exactly; outputs carry plain JSON numbers. Every id is a counter: no wall clock, no randomness.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from fractions import Fraction
from collections.abc import Mapping
from typing import Any, Collection

from ..domain import Call, Declaration, Domain, WorldEnv, register_domain, spec_section, tool
from ..errors import ServiceError, WorldSpecError
from ..spec_bounds import BOUNDS, bounded_number
from ..values import bounded

__all__ = ["BankReal", "BankStub"]

SECTION_KEYS = ("accounts", "confirm_above", "rate_limit")
ACCOUNT_KEYS = ("owner", "balance")
RATE_LIMIT_KEYS = ("limit", "window_seconds")


# --------------------------------------------------------------------------------------------------
# Money
# --------------------------------------------------------------------------------------------------


def _money(value: Any) -> Fraction | None:
    """A JSON number as exact money, or None if ``value`` is not a finite number."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float) and math.isfinite(value):
        return Fraction(repr(value))
    return None


def _number(amount: Fraction) -> int | float:
    """Money as a JSON number."""
    return amount.numerator if amount.denominator == 1 else float(amount)


def _money_text(amount: Fraction) -> str:
    """Exact text for snapshots and evidence: the JSON number when it is exact, else ``p/q``."""
    if amount.denominator == 1:
        return str(amount.numerator)
    text = repr(float(amount))
    return text if Fraction(text) == amount else str(amount)


# --------------------------------------------------------------------------------------------------
# State
# --------------------------------------------------------------------------------------------------


@dataclass
class Account:
    owner: str
    balance: Fraction


@dataclass
class Transfer:
    """A transfer the bank accepted; ``confirmation_id`` is set while (and after) it waits at the gate."""

    transfer_id: str
    principal: str
    source: str
    target: str
    amount: Fraction
    status: str = "completed"
    confirmation_id: str | None = None

    def describe(self) -> dict[str, Any]:
        return {"transfer_id": self.transfer_id, "from": self.source, "to": self.target, "amount": _number(self.amount)}


@dataclass(frozen=True)
class RateLimit:
    limit: int
    window: float


@dataclass(frozen=True)
class KeyUse:
    """What an idempotency key was first used for, and the answer to repeat."""

    fingerprint: tuple[Any, ...]
    transfer_id: str
    output: dict[str, Any]


def _fingerprint(principal: str, source: Any, target: Any, amount: Any) -> tuple[Any, ...]:
    """What makes two transfers "the same" for an idempotency key: 100 and 100.0 are; 1 and true are not."""
    money = _money(amount)
    return (principal, source, target, money if money is not None else repr(amount))


# --------------------------------------------------------------------------------------------------
# World spec
# --------------------------------------------------------------------------------------------------


def _check_keys(raw: Mapping[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in raw:
        if key not in allowed:
            raise WorldSpecError(f"{where}.{key}", f"unknown field; expected one of {', '.join(allowed)}")


def _spec_money(value: Any, where: str) -> Fraction:
    amount = _money(value)
    if amount is None:
        raise WorldSpecError(where, f"expected a finite number, got {value!r}")
    return amount


def _load_accounts(spec: Mapping[str, Any]) -> dict[str, Account]:
    accounts: dict[str, Account] = {}
    for name, raw in spec_section(spec, "accounts", "world.bank", dict, {}).items():
        where = f"world.bank.accounts.{name}"
        if not isinstance(name, str):
            raise WorldSpecError(where, "account ids must be strings")
        if not isinstance(raw, Mapping):
            raise WorldSpecError(where, "expected a mapping with owner and balance")
        _check_keys(raw, ACCOUNT_KEYS, where)
        owner = raw.get("owner")
        if not isinstance(owner, str):
            raise WorldSpecError(f"{where}.owner", f"expected the owning principal's name, got {owner!r}")
        accounts[name] = Account(owner, _spec_money(raw.get("balance", 0), f"{where}.balance"))
    return accounts


def _load_threshold(spec: Mapping[str, Any]) -> Fraction | None:
    value = spec.get("confirm_above")
    return None if value is None else _spec_money(value, "world.bank.confirm_above")


def _load_rate_limit(spec: Mapping[str, Any]) -> RateLimit | None:
    raw = spec.get("rate_limit")
    if raw is None:
        return None
    where = "world.bank.rate_limit"
    if not isinstance(raw, Mapping):
        raise WorldSpecError(where, "expected a mapping with limit and window_seconds")
    _check_keys(raw, RATE_LIMIT_KEYS, where)
    for key in RATE_LIMIT_KEYS:
        if raw.get(key) is None:
            raise WorldSpecError(f"{where}.{key}", f"required: {BOUNDS['bank.rate_limit.' + key].describe()}")
    limit = bounded_number(raw, "bank.rate_limit.limit", None)
    window = bounded_number(raw, "bank.rate_limit.window_seconds", None)
    return RateLimit(limit, float(window))


# --------------------------------------------------------------------------------------------------
# The domain
# --------------------------------------------------------------------------------------------------


class _Bank(Domain):
    name = "bank"
    declaration = Declaration(in_memory=True)  # balances and gates live in memory

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        super().__init__(spec, env)
        _check_keys(spec, SECTION_KEYS, "world.bank")
        self.accounts = _load_accounts(spec)
        self.confirm_above = _load_threshold(spec)
        self.rate_limit = _load_rate_limit(spec)
        self.transfers: dict[str, Transfer] = {}
        self.confirmations: dict[str, Transfer] = {}
        self.keys: dict[str, KeyUse] = {}
        # account -> (its resource id, the balance last written as text, that text): balances are immutable
        # fractions, so a balance that is the same object has the same text
        self._texts: dict[str, tuple[str, Fraction, str]] = {}

    def snapshot(self) -> dict[str, str]:
        state = {}
        texts = self._texts
        for name, account in self.accounts.items():
            known = texts.get(name)
            if known is None or known[1] is not account.balance:
                known = texts[name] = (f"bank:account/{name}", account.balance, _money_text(account.balance))
            state[known[0]] = known[2]
        for cid, transfer in self.confirmations.items():
            if transfer.status == "pending":
                state[f"bank:pending/{cid}"] = json.dumps({**transfer.describe(), "principal": transfer.principal}, sort_keys=True)
        for key, use in self.keys.items():
            state[f"bank:idempotency/{key}"] = use.transfer_id
        return state

    def values(self, resources: Collection[str]) -> dict[str, Any]:
        """An account's owner and balance, a pending transfer's parties and amount, the transfer an
        idempotency key is bound to."""
        known = self._resource_values()
        return {key: known[key] for key in resources if key in known}

    def _resource_values(self) -> dict[str, Any]:
        state: dict[str, Any] = {f"bank:account/{name}": self._account_value(name) for name in self.accounts}
        for cid, transfer in self.confirmations.items():
            if transfer.status == "pending":
                state[f"bank:pending/{cid}"] = bounded({**transfer.describe(), "principal": transfer.principal})
        for key, use in self.keys.items():
            state[f"bank:idempotency/{key}"] = {"transfer_id": use.transfer_id}
        return state

    def _account_value(self, name: str) -> dict[str, Any]:
        account = self.accounts[name]
        return {"owner": account.owner, "balance": _number(account.balance)}

    def view(self) -> dict[str, Any]:
        """``accounts`` (id -> owner, balance), ``transfers`` the bank accepted (id -> from, to, amount,
        status, principal), ``pending`` confirmations (id -> transfer id), ``idempotency_keys`` (key ->
        transfer id)."""
        return {
            "accounts": {name: self._account_value(name) for name in self.accounts},
            "transfers": bounded(
                {tid: {**t.describe(), "status": t.status, "principal": t.principal} for tid, t in self.transfers.items()},
                max_items=1024,
            ),
            "pending": {cid: t.transfer_id for cid, t in self.confirmations.items() if t.status == "pending"},
            "idempotency_keys": bounded({key: use.transfer_id for key, use in self.keys.items()}, max_items=1024),
        }

    def _account(self, name: Any, param: str) -> Account:
        if not isinstance(name, str):
            raise ServiceError(400, f"{param} must be an account id string, got {name!r}")
        if name not in self.accounts:
            raise ServiceError(404, f"no account {name!r}")
        return self.accounts[name]

    def _new_transfer(self, call: Call, source: str, target: str, amount: Fraction) -> Transfer:
        transfer = Transfer(f"txn-{len(self.transfers) + 1}", call.principal, source, target, amount)
        self.transfers[transfer.transfer_id] = transfer
        return transfer

    def _move(self, transfer: Transfer) -> None:
        self.accounts[transfer.source].balance -= transfer.amount
        self.accounts[transfer.target].balance += transfer.amount
        transfer.status = "completed"

    def _balance_output(self, name: str) -> dict[str, Any]:
        return {"account": name, "balance": _number(self.accounts[name].balance)}


@register_domain
class BankStub(_Bank):
    semantics = "stub"
    profiles = {
        "default": "moves the money at once: no checks, no gate, no rate limit, idempotency keys ignored",
        "checked": "checks ownership (403) and funds (409), but has no gate and no rate limit and ignores "
        "idempotency keys",
    }

    @tool
    def get_balance(self, call: Call, account: Any) -> dict[str, Any]:
        call.read(f"bank:account/{account}")
        self._account(account, "account")
        return self._balance_output(account)

    @tool
    def transfer_funds(self, call: Call, from_: Any, to: Any, amount: Any, idempotency_key: Any = None) -> dict[str, Any]:
        call.read(*_transfer_reads(from_, to, idempotency_key))
        self._account(from_, "from")
        self._account(to, "to")
        value = _money(amount)
        if value is None:
            raise ServiceError(400, f"amount must be a number, got {amount!r}")
        if self.profile == "checked":
            source = self.accounts[from_]
            if source.owner != call.principal:
                raise ServiceError(403, f"{call.principal!r} may not transfer from account {from_!r}")
            if value <= 0:
                raise ServiceError(400, f"amount must be a positive number, got {amount!r}")
            if source.balance < value:
                raise ServiceError(409, f"insufficient funds in account {from_!r}")
        transfer = self._new_transfer(call, from_, to, value)
        self._move(transfer)
        return {"transfer_id": transfer.transfer_id, "status": "completed"}

    @tool
    def confirm_transfer(self, call: Call, confirmation_id: Any) -> dict[str, Any]:
        call.read(f"bank:pending/{confirmation_id}")
        # The stub holds nothing at a gate, so it cannot say which transfer an id confirms: it resolves
        # nothing, rather than inventing null from/to/amount that a policy would then compare.
        return {"status": "completed"}


@register_domain
class BankReal(_Bank):
    semantics = "real"

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        super().__init__(spec, env)
        self.attempts: dict[str, list[float]] = {}

    @tool
    def get_balance(self, call: Call, account: Any) -> dict[str, Any]:
        call.read(f"bank:account/{account}")
        owner = self._account(account, "account").owner
        if owner != call.principal:
            call.note(f"account {account!r} is owned by {owner!r}, not {call.principal!r}; balance withheld")
            raise ServiceError(403, f"{call.principal!r} may not read account {account!r}")
        return self._balance_output(account)

    @tool
    def transfer_funds(self, call: Call, from_: Any, to: Any, amount: Any, idempotency_key: Any = None) -> dict[str, Any]:
        call.read(*_transfer_reads(from_, to, idempotency_key))
        self._admit(call)
        fingerprint = _fingerprint(call.principal, from_, to, amount)
        replay = self._replay(call, idempotency_key, fingerprint)
        if replay is not None:
            return replay
        value = self._check_transfer(call, from_, to, amount)
        transfer = self._new_transfer(call, from_, to, value)
        if self.confirm_above is not None and value > self.confirm_above:
            output = self._hold(call, transfer)
        else:
            self._complete(call, transfer)
            output = {"transfer_id": transfer.transfer_id, "status": "completed"}
        if idempotency_key is not None:
            self.keys[idempotency_key] = KeyUse(fingerprint, transfer.transfer_id, dict(output))
            call.note(f"idempotency key {idempotency_key!r} recorded for transfer {transfer.transfer_id}")
        return output

    def _admit(self, call: Call) -> None:
        """Rate limit: at most ``limit`` admitted attempts per principal in any ``window_seconds``.

        Only admitted attempts count, so a principal is allowed again ``window_seconds`` after its
        oldest admitted attempt in the window, however often it was refused meanwhile.
        """
        if self.rate_limit is None:
            return
        limit, window = self.rate_limit.limit, self.rate_limit.window
        recent = [t for t in self.attempts.get(call.principal, []) if call.at - window < t <= call.at]
        if len(recent) >= limit:
            call.note(
                f"rate limit: {call.principal!r} already made {len(recent)} transfer_funds attempt(s) in the "
                f"{window:g}s before t={call.at:g} (limit {limit}); refused, no money moved"
            )
            raise ServiceError(429, f"rate limit of {limit} transfers per {window:g}s exceeded for {call.principal!r}")
        self.attempts[call.principal] = recent + [call.at]

    def _replay(self, call: Call, key: Any, fingerprint: tuple[Any, ...]) -> dict[str, Any] | None:
        """The first answer for a reused idempotency key with the same parameters; 409 if they differ."""
        if key is None:
            return None
        if not isinstance(key, str):
            raise ServiceError(400, f"idempotency_key must be a string, got {key!r}")
        use = self.keys.get(key)
        if use is None:
            return None
        if use.fingerprint != fingerprint:
            call.note(
                f"idempotency key {key!r} already used by transfer {use.transfer_id} with different parameters; "
                "refused, no money moved"
            )
            raise ServiceError(409, f"idempotency key {key!r} was already used with different parameters")
        call.replayed(f"idempotency key {key} already used by transfer {use.transfer_id}; returned its first result")
        return dict(use.output)

    def _check_transfer(self, call: Call, from_: Any, to: Any, amount: Any) -> Fraction:
        """Accounts exist (404), the source is the principal's (403), a positive amount (400), funds (409)."""
        source = self._account(from_, "from")
        self._account(to, "to")
        if source.owner != call.principal:
            call.note(f"account {from_!r} is owned by {source.owner!r}, not {call.principal!r}; refused, no money moved")
            raise ServiceError(403, f"{call.principal!r} may not transfer from account {from_!r}")
        value = _money(amount)
        if value is None or value <= 0:
            raise ServiceError(400, f"amount must be a positive number, got {amount!r}")
        self._check_funds(call, source, from_, value)
        return value

    def _check_funds(self, call: Call, source: Account, name: str, amount: Fraction) -> None:
        if source.balance < amount:
            call.note(
                f"insufficient funds: {name!r} holds {_money_text(source.balance)}, the transfer needs "
                f"{_money_text(amount)}; refused, no money moved"
            )
            raise ServiceError(409, f"insufficient funds in account {name!r}")

    def _hold(self, call: Call, transfer: Transfer) -> dict[str, Any]:
        cid = f"cnf-{len(self.confirmations) + 1}"
        transfer.status, transfer.confirmation_id = "pending", cid
        self.confirmations[cid] = transfer
        call.hold(
            f"transfer {transfer.transfer_id} of {_money_text(transfer.amount)} above the confirmation threshold "
            f"{_money_text(self.confirm_above or Fraction(0))} is pending confirmation {cid}"
        )
        return {"transfer_id": transfer.transfer_id, "status": "pending", "confirmation_id": cid}

    def _complete(self, call: Call, transfer: Transfer) -> None:
        self._move(transfer)
        call.note(
            f"transfer {transfer.transfer_id} moved {_money_text(transfer.amount)} from {transfer.source!r} "
            f"(now {_money_text(self.accounts[transfer.source].balance)}) to {transfer.target!r} "
            f"(now {_money_text(self.accounts[transfer.target].balance)})"
        )

    @tool
    def confirm_transfer(self, call: Call, confirmation_id: Any) -> dict[str, Any]:
        call.read(f"bank:pending/{confirmation_id}")
        transfer = self.confirmations.get(confirmation_id) if isinstance(confirmation_id, str) else None
        if transfer is None:
            raise ServiceError(404, f"no pending transfer with confirmation id {confirmation_id!r}")
        call.resolve(**transfer.describe())
        call.note(f"confirmation {confirmation_id} resolves to transfer {transfer.transfer_id} by {transfer.principal!r}")
        if transfer.status != "pending":
            call.note(f"transfer {transfer.transfer_id} is already {transfer.status}; refused, no money moved")
            raise ServiceError(409, f"transfer {transfer.transfer_id} is not pending")
        if call.principal != transfer.principal:
            call.note(
                f"transfer {transfer.transfer_id} was requested by {transfer.principal!r}; {call.principal!r} may "
                "not confirm it; refused, no money moved"
            )
            raise ServiceError(403, f"{call.principal!r} may not confirm transfer {transfer.transfer_id}")
        self._check_funds(call, self.accounts[transfer.source], transfer.source, transfer.amount)
        self._complete(call, transfer)
        return {"transfer_id": transfer.transfer_id, "status": "completed"}


def _transfer_reads(source: Any, target: Any, idempotency_key: Any) -> list[str]:
    """The resources a transfer depends on: both accounts and, if given, its idempotency key."""
    reads = [f"bank:account/{source}", f"bank:account/{target}"]
    if idempotency_key is not None:
        reads.append(f"bank:idempotency/{idempotency_key}")
    return reads
