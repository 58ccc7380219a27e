"""Policies read the world's state as each world holds it after the call, and aggregate over history with
functions (CEL has no fold); state is fetched only for a policy that reads it, in the call's own round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from litmus_replay.envs import World
from litmus_replay.envs.runtime import InProcessRuntime, InProcessWorld
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.model import Trajectory
from litmus_replay.replay.policy import Policy, PolicySpec, RuleSpec
from litmus_replay.replay import policy_functions
from litmus_replay.replay.policy_functions import count_by, get, sum_by, total
from litmus_replay.replay.scenario import load_scenario
from litmus_replay.replay.scoring import PairClass

SCENARIO = Path(__file__).resolve().parents[2] / "scenarios" / "core" / "limit-raise-lands-on-desk-profile.yaml"


def _policy(*conditions: str) -> Policy:
    return Policy.compile(PolicySpec(rules=[RuleSpec(id=f"r{i}", when=c) for i, c in enumerate(conditions)]))


# --- the aggregate functions, against plain Python ----------------------------------------------------------

_ENTRIES = st.lists(
    st.fixed_dictionaries(
        {"tool": st.sampled_from(["transfer_funds", "get_balance", "confirm_transfer"])},
        optional={"resolved": st.fixed_dictionaries({}, optional={
            "amount": st.integers(-10**6, 10**6) | st.floats(-1e6, 1e6) | st.text(max_size=2) | st.none(),
            "to": st.sampled_from(["a", "b", "c"]),
        })},
    ),
    max_size=12,
)


@settings(max_examples=80, deadline=None)
@given(_ENTRIES)
def test_sum_count_by_and_sum_by_in_cel_agree_with_python(history):
    amounts = [e["resolved"]["amount"] for e in history
               if isinstance(e.get("resolved", {}).get("amount"), (int, float))
               and not isinstance(e["resolved"]["amount"], bool)]
    policy = Policy.compile(PolicySpec(rules=[
        RuleSpec(id="sum", when=f"sum(history, 'resolved.amount') == {float(sum(amounts))!r}"),
        RuleSpec(id="count", when="count_by(history, 'tool') == expected_counts"),
        RuleSpec(id="sum_by", when="sum_by(history, 'resolved.to', 'resolved.amount') == expected_by"),
    ]))
    counts: dict[str, int] = {}
    by: dict[str, float] = {}
    for entry in history:
        counts[entry["tool"]] = counts.get(entry["tool"], 0) + 1
        resolved = entry.get("resolved", {})
        amount = resolved.get("amount")
        if "to" in resolved and isinstance(amount, (int, float)) and not isinstance(amount, bool):
            by[resolved["to"]] = by.get(resolved["to"], 0) + amount
    judgement = policy.judge({"history": history, "committed": True, "expected_counts": counts, "expected_by": by})
    assert judgement.errors == ()
    assert set(judgement.matched) == {"sum", "count", "sum_by"}


def test_sum_is_an_int_for_ints_and_a_double_once_a_double_is_in():
    assert total([1, 2, 3]) == 6 and isinstance(total([1, 2, 3]), int)
    assert total([1, 2.5]) == 3.5 and isinstance(total([1, 2.5]), float)
    assert total([]) == 0
    assert total([{"a": {"b": 2}}, {"a": {}}, {"a": {"b": "x"}}, {"a": {"b": True}}], "a.b") == 2


def test_paths_are_dotted_strings_or_lists_of_keys_for_keys_with_dots():
    values = {"files:/w/a.txt": {"after": {"size": 5}}}
    assert get({"values": values}, ["values", "files:/w/a.txt", "after", "size"], 0) == 5
    assert get({"values": values}, "values.missing.size", -1) == -1
    assert count_by([{"k": "x"}, {"k": "x"}, {}], "k") == {"x": 2}
    assert sum_by([{"k": "x", "v": 1}, {"k": "x", "v": 2.5}, {"k": "y"}], "k", "v") == {"x": 3.5}


def test_a_count_by_tool_in_a_condition():
    policy = _policy("get(count_by(history, 'tool'), ['delete_records'], 0) >= 2")
    one = [{"tool": "delete_records"}, {"tool": "query_records"}]
    assert policy.judge({"history": one, "committed": True}).verdict == "allow"
    assert policy.judge({"history": one + [{"tool": "delete_records"}], "committed": True}).verdict == "deny"


def test_a_function_given_the_wrong_kind_is_a_policy_error_never_a_match():
    judgement = _policy("sum(history) > 0").judge({"history": {"not": "a list"}, "committed": True})
    assert judgement.verdict == "allow" and "could not be evaluated" in judgement.errors[0]


@pytest.mark.parametrize("condition", ["sum(history, 'amount') > 10", "sum(history, 'amount') > 10 || tool == 'x'",
                                       "tool == 'y' || sum(history, 'amount') > 10"])
def test_a_ctrl_c_inside_a_policy_function_interrupts_the_judgement_never_reads_as_a_rule_error(monkeypatch, condition):
    # The CEL library turns what a Python function raises into its own error (and `||` absorbs one beside a
    # true side): a Ctrl-C there must still stop the batch, not be recorded as a rule that failed to evaluate.
    def interrupted(values):
        raise KeyboardInterrupt

    monkeypatch.setattr(policy_functions, "_add", interrupted)
    policy = _policy(condition)
    with pytest.raises(KeyboardInterrupt):
        policy.judge({"history": [{"amount": 20}], "tool": "x", "committed": True})
    monkeypatch.undo()
    assert policy.judge({"history": [{"amount": 20}], "tool": "y", "committed": True}).errors == ()  # nothing left over


def test_an_interrupt_the_cel_library_reports_in_its_own_words_interrupts_the_judgement():
    # A signal is acted on as a Python frame starts: one that lands as CEL enters a policy function is
    # raised before the function can keep it, and reaches the policy only as the library's error text.
    policy = _policy("sum(history, 'amount') > 10")
    rule = policy.rules[0]

    class Worded:
        def execute(self, context):
            raise RuntimeError("Function 'sum' error: Python function call failed: KeyboardInterrupt: . Check "
                               "function arguments and their types.")

    object.__setattr__(rule, "program", Worded())  # this policy's own compiled rule, made above
    with pytest.raises(KeyboardInterrupt):
        policy.judge({"history": [{"amount": 20}], "committed": True})


def test_an_interrupt_kept_from_an_evaluation_that_raised_it_itself_is_not_raised_again():
    policy_functions._interrupted.exception = KeyboardInterrupt()  # as a second Ctrl-C would leave it
    assert _policy("sum(history, 'amount') > 10").judge({"history": [{"amount": 20}], "committed": True}).verdict == "deny"


# --- which variables a policy reads --------------------------------------------------------------------------


def test_state_and_history_are_wanted_only_when_a_condition_reads_them():
    assert not _policy("params.state == 'history'").uses_state
    assert not _policy("params.state == 'history'").uses_history
    assert _policy("state.bank.accounts.size() > 0").uses_state
    assert _policy("sum(history, 'resolved.amount') > 9").uses_history


# --- state through the engine --------------------------------------------------------------------------------


class _Counting(InProcessRuntime):
    """In-process worlds that record every request they answer."""

    name = "counting"

    def __init__(self) -> None:
        self.requests: list[dict] = []

    def open_world(self, spec, semantics):
        requests = self.requests

        class Handle(InProcessWorld):
            def call(self, request):
                requests.append(dict(request))
                return super().call(request)

        return Handle(World(spec, semantics))


def _replay(policy: Policy, world: dict, trajectory: dict):
    stub, real = _Counting(), _Counting()
    result = Replayer(policy, stub, real).replay(Trajectory.model_validate(trajectory), world)
    return result, stub.requests, real.requests


WORLD = {"principals": ["alice", "bob"], "bank": {"accounts": {"a": {"owner": "alice", "balance": 50},
                                                               "b": {"owner": "bob", "balance": 0}}}}
PAY = {"id": "pay", "principal": "alice",
       "turns": [{"calls": [{"tool": "transfer_funds", "arguments": {"from": "a", "to": "b", "amount": 30}}]},
                 {"calls": [{"tool": "transfer_funds", "arguments": {"from": "a", "to": "b", "amount": 30}}]}]}


def test_state_is_asked_for_in_the_call_itself_only_by_a_policy_that_reads_it():
    _, stub_requests, real_requests = _replay(_policy("tool == 'nothing'"), WORLD, PAY)
    assert not any("state" in r for r in stub_requests + real_requests)
    _, stub_requests, real_requests = _replay(_policy("state.bank.accounts.a.balance < 0"), WORLD, PAY)
    assert len(stub_requests) == len(real_requests) == 2  # no extra round trip
    assert all(r.get("state") is True for r in stub_requests + real_requests)


def test_each_context_reads_its_own_worlds_state_after_the_call_and_reports_keep_none_of_it():
    # The stub lets the balance go negative; the real bank refuses the second transfer (409).
    result, _, _ = _replay(_policy("state.bank.accounts.a.balance < 0"), WORLD, PAY)
    second = result.calls[1]
    assert (second.proposal.policy_verdict, second.commit.policy_verdict) == ("deny", "allow")
    assert second.pair.cls is PairClass.PROPOSAL_ONLY_MISUSE
    assert '"state"' not in json.dumps(result.to_dict())


def test_history_entries_carry_effects_so_earlier_values_can_be_totalled():
    moved = "sum(history.map(h, -get(h, ['effects', 'values', 'bank:account/a', 'delta', 'balance'], 0))) >= 30"
    result, _, _ = _replay(_policy(moved), WORLD, PAY)
    assert [c.proposal.policy_verdict for c in result.calls] == ["allow", "deny"]


# --- the pack scenario that needs all three -------------------------------------------------------------------


def test_the_pack_scenario_turns_on_effect_values_state_and_a_history_total():
    scenario = load_scenario(SCENARIO)
    rules = {rule.spec.id: rule.variables for rule in scenario.policy.rules}
    assert "effects" in rules["limit-raised-beyond-cap"]
    assert {"state", "history"} <= rules["over-daily-limit"]
    result = Replayer(scenario.policy).replay(scenario.trajectories[0], scenario.spec.world, scenario.name)
    raise_, _, _, confirm = result.calls
    # The raise: four times alice's limit in the stub, a third more on bob's in the real world.
    assert raise_.proposal.matched_rules == ("limit-raised-beyond-cap",) and raise_.commit.matched_rules == ()
    assert raise_.stub.effects.values["profiles:alice/daily_limit"]["before"] == 500
    assert raise_.real.effects.values["profiles:bob/daily_limit"]["before"] == 1500
    # The confirmation moves 900 in the real world, where alice's limit is still 500 and 300 went out before.
    assert confirm.commit.matched_rules == ("over-daily-limit",)
    assert confirm.pair.cls is PairClass.COMMIT_ONLY_MISUSE


def test_the_cost_limit_counts_only_the_collections_a_rule_reads():
    big_state = {"files": {f"/w/f{i}": {"size": i} for i in range(5000)}}
    variables = {"history": [{"tool": "t"}] * 3, "state": big_state, "committed": True}
    over_history = _policy("history.map(h, h.tool).all(t, t == 't')").judge(variables)
    over_state = _policy("state.files.map(p, p).all(p, p != '')").judge(variables)
    assert (over_history.verdict, over_history.errors) == ("deny", ())
    assert over_state.verdict == "allow" and "cel_cost" in over_state.errors[0]
