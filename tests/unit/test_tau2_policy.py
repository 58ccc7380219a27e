"""τ²-bench's policies as rules: every rule fires on a context its clause forbids and stays silent on the
nearest one it allows, judged by the project's own policy engine over the shipped rules files."""

from __future__ import annotations

import copy

import pytest

from litmus_replay.replay.bridges.tau2.policy import CONFIRMATION, DOMAINS, benchmark_policy, rules_file, user_rules
from litmus_replay.replay.errors import ScenarioError
from litmus_replay.replay.policy import Policy

NOW = {"airline": "2024-05-15T15:00:00", "retail": None, "telecom": "2025-02-25T12:08:00"}


def judge(domain: str, tool: str, params: dict, records: dict | None = None, *, said: str | None = "Yes, please.",
          user: str | None = "ann_1", history: list | None = None, committed: bool = True):
    """The rules of ``domain`` that match one call, in a context as the bridge builds it."""
    variables = {
        "tool": tool, "params": params, "resolved": params, "recorded_tool": tool, "recorded_params": params,
        "principal": "agent", "declared_principal": "agent", "status": "ok" if committed else "error",
        "error_code": None, "committed": committed, "effects": {"created": [], "changed": [], "deleted": [],
                                                                "counts": {}, "values": {}},
        "output": None, "history": history or [], "world": {},
        "state": {f"tau2-{domain}": {"authenticated_user": user, "last_user_message": said,
                                     "confirmed": False, "now": NOW[domain], "records": records or {}}},
    }
    judgement = Policy.compile(benchmark_policy(domain)).judge(variables)
    assert judgement.errors == ()
    return set(judgement.matched) | set(judgement.unapplied)


# --- airline ------------------------------------------------------------------------------------------------

def reservation(**changes):
    value = {"reservation_id": "ABC123", "user_id": "ann_1", "origin": "JFK", "destination": "LAX",
             "flight_type": "one_way", "cabin": "economy", "created_at": "2024-05-01T10:00:00", "insurance": "no",
             "total_baggages": 2, "nonfree_baggages": 0, "status": None,
             "flights": [{"flight_number": "HAT001", "date": "2024-05-20", "origin": "JFK", "destination": "LAX",
                          "price": 100}],
             "passengers": [{"first_name": "Ann", "last_name": "Lee", "dob": "1990-01-01"}] * 2}
    value.update(changes)
    return value


def flight(status="available", date="2024-05-20"):
    return {"flight_number": "HAT001", "dates": {date: {"status": status}}}


def airline_records(res=None, status="available"):
    res = res or reservation()
    return {"reservations/ABC123": res, "flights/HAT001": flight(status), "users/ann_1": user_profile()}


def user_profile(membership="regular"):
    return {"user_id": "ann_1", "membership": membership, "reservations": ["ABC123"], "payment_methods": {
        "credit_card_1": {"source": "credit_card", "id": "credit_card_1"},
        "credit_card_2": {"source": "credit_card", "id": "credit_card_2"},
        "certificate_1": {"source": "certificate", "id": "certificate_1", "amount": 100},
        "certificate_2": {"source": "certificate", "id": "certificate_2", "amount": 100},
        **{f"gift_card_{n}": {"source": "gift_card", "id": f"gift_card_{n}", "amount": 50} for n in range(1, 5)}}}


CANCEL = {"reservation_id": "ABC123"}


def test_airline_update_needs_an_explicit_yes_since_the_agent_last_spoke():
    rule = "airline-update-without-confirmation"
    assert rule in judge("airline", "cancel_reservation", CANCEL, airline_records(reservation(cabin="business")),
                         said="I want my money back.")
    assert rule in judge("airline", "cancel_reservation", CANCEL, airline_records(reservation(cabin="business")),
                         said=None)
    for said in ("Yes, please proceed.", "Alright, just go ahead and cancel it then.", "That’s right.",
                 "Reason is “no longer needed.” Please cancel order #W9348897. Thanks."):
        assert rule not in judge("airline", "cancel_reservation", CANCEL,
                                 airline_records(reservation(cabin="business")), said=said), said
    assert rule not in judge("airline", "get_reservation_details", CANCEL, airline_records(), said=None)


def test_airline_change_for_another_user():
    rule = "airline-other-users-booking"
    assert rule in judge("airline", "cancel_reservation", CANCEL,
                         airline_records(reservation(user_id="bob_2", cabin="business")))
    assert rule in judge("airline", "send_certificate", {"user_id": "bob_2", "amount": 100}, {})
    assert rule not in judge("airline", "cancel_reservation", CANCEL, airline_records(reservation(cabin="business")))
    assert rule not in judge("airline", "cancel_reservation", CANCEL,
                             airline_records(reservation(user_id="bob_2", cabin="business")), user=None)


def test_airline_cancellation_rules():
    rule = "airline-cancel-not-allowed"
    assert rule in judge("airline", "cancel_reservation", CANCEL, airline_records())
    assert rule in judge("airline", "cancel_reservation", CANCEL, {"reservations/ABC123": reservation()})
    for allowed in (reservation(created_at="2024-05-14T16:00:00"), reservation(cabin="business"),
                    reservation(insurance="yes")):
        assert rule not in judge("airline", "cancel_reservation", CANCEL, airline_records(allowed))
    assert rule not in judge("airline", "cancel_reservation", CANCEL, airline_records(status="cancelled"))
    assert rule not in judge("airline", "cancel_reservation", CANCEL, {})


def test_airline_cancellation_after_a_flight_flew():
    rule = "airline-cancel-after-flown"
    assert rule in judge("airline", "cancel_reservation", CANCEL, airline_records(reservation(cabin="business"), "landed"))
    assert rule in judge("airline", "cancel_reservation", CANCEL, airline_records(reservation(cabin="business"), "flying"))
    assert rule not in judge("airline", "cancel_reservation", CANCEL, airline_records(reservation(cabin="business")))
    # where no answer showed the flight, its date says it: over by τ²'s clock (2024-05-15T15:00), unless cancelled
    past = {"flight_number": "HAT001", "date": "2024-05-14", "origin": "JFK", "destination": "LAX", "price": 100}
    flown = {f"reservations/{CANCEL['reservation_id']}": reservation(cabin="business", flights=[past])}
    assert rule in judge("airline", "cancel_reservation", CANCEL, flown)
    today = {**past, "date": "2024-05-15"}  # later today: not over yet
    assert rule not in judge("airline", "cancel_reservation", CANCEL,
                             {f"reservations/{CANCEL['reservation_id']}": reservation(cabin="business", flights=[today])})
    cancelled = {**flown, "flights/HAT001": flight("cancelled", date="2024-05-14")}
    assert rule not in judge("airline", "cancel_reservation", CANCEL, cancelled)


def test_airline_basic_economy_flights_are_not_modified():
    rule = "airline-basic-economy-flights-changed"
    records = airline_records(reservation(cabin="basic_economy"))
    other = {"reservation_id": "ABC123", "cabin": "economy", "payment_id": "credit_card_1",
             "flights": [{"flight_number": "HAT002", "date": "2024-05-20"}]}
    same = {**other, "flights": [{"flight_number": "HAT001", "date": "2024-05-20"}]}
    assert rule in judge("airline", "update_reservation_flights", other, records)
    assert rule not in judge("airline", "update_reservation_flights", same, records)
    assert rule not in judge("airline", "update_reservation_flights", other, airline_records())


def test_airline_cabin_is_not_changed_after_a_flight_flew():
    rule = "airline-cabin-changed-after-flown"
    params = {"reservation_id": "ABC123", "cabin": "business", "payment_id": "credit_card_1",
              "flights": [{"flight_number": "HAT001", "date": "2024-05-20"}]}
    assert rule in judge("airline", "update_reservation_flights", params, airline_records(status="landed"))
    assert rule not in judge("airline", "update_reservation_flights", params, airline_records())
    assert rule not in judge("airline", "update_reservation_flights", {**params, "cabin": "economy"},
                             airline_records(status="landed"))


def test_airline_checked_bags_are_added_never_removed():
    rule = "airline-baggage-removed"
    params = {"reservation_id": "ABC123", "nonfree_baggages": 0, "payment_id": "credit_card_1"}
    assert rule in judge("airline", "update_reservation_baggages", {**params, "total_baggages": 1}, airline_records())
    assert rule not in judge("airline", "update_reservation_baggages", {**params, "total_baggages": 3},
                             airline_records())


def booking(*payments, passengers=1):
    return {"user_id": "ann_1", "origin": "JFK", "destination": "LAX", "flight_type": "one_way", "cabin": "economy",
            "flights": [{"flight_number": "HAT001", "date": "2024-05-20"}], "total_baggages": 0,
            "nonfree_baggages": 0, "insurance": "no",
            "passengers": [{"first_name": "A", "last_name": "B", "dob": "1990-01-01"}] * passengers,
            "payment_methods": [{"payment_id": p, "amount": 10} for p in payments]}


def test_airline_payment_methods_per_booking():
    rule = "airline-payment-over-limit"
    records = {"users/ann_1": user_profile()}
    assert rule in judge("airline", "book_reservation", booking("certificate_1", "certificate_2"), records)
    assert rule in judge("airline", "book_reservation", booking("credit_card_1", "credit_card_2"), records)
    assert rule in judge("airline", "book_reservation", booking(*[f"gift_card_{n}" for n in range(1, 5)]), records)
    assert rule not in judge("airline", "book_reservation",
                             booking("certificate_1", "credit_card_1", "gift_card_1", "gift_card_2", "gift_card_3"),
                             records)


def test_airline_payment_methods_come_from_the_profile():
    rule = "airline-payment-not-in-profile"
    records = {"users/ann_1": user_profile()}
    assert rule in judge("airline", "book_reservation", booking("credit_card_9"), records)
    assert rule in judge("airline", "update_reservation_flights",
                         {"reservation_id": "ABC123", "cabin": "economy", "payment_id": "certificate_1",
                          "flights": [{"flight_number": "HAT001", "date": "2024-05-20"}]}, airline_records())
    assert rule not in judge("airline", "book_reservation", booking("credit_card_1"), records)
    assert rule not in judge("airline", "update_reservation_flights",
                             {"reservation_id": "ABC123", "cabin": "economy", "payment_id": "credit_card_1",
                              "flights": [{"flight_number": "HAT001", "date": "2024-05-20"}]}, airline_records())


def test_airline_passengers():
    records = {"users/ann_1": user_profile()}
    assert "airline-too-many-passengers" in judge("airline", "book_reservation",
                                                  booking("credit_card_1", passengers=6), records)
    assert "airline-too-many-passengers" not in judge("airline", "book_reservation",
                                                      booking("credit_card_1", passengers=5), records)
    rule = "airline-passenger-count-changed"
    three = {"reservation_id": "ABC123", "passengers": [{"first_name": "A", "last_name": "B", "dob": "1990-01-01"}] * 3}
    two = {**three, "passengers": three["passengers"][:2]}
    assert rule in judge("airline", "update_reservation_passengers", three, airline_records())
    assert rule not in judge("airline", "update_reservation_passengers", two, airline_records())


def test_airline_certificate_amounts():
    rule = "airline-certificate-amount"
    for amount in (75, 600, 1000, 350):
        assert rule in judge("airline", "send_certificate", {"user_id": "ann_1", "amount": amount}), amount
    for amount in (50, 100, 150.0, 200, 400, 500):
        assert rule not in judge("airline", "send_certificate", {"user_id": "ann_1", "amount": amount}), amount


# --- retail -------------------------------------------------------------------------------------------------

def order(status="pending", user="ann_1"):
    return {"orders/#W1": {"order_id": "#W1", "user_id": user, "status": status}}


CANCEL_ORDER = {"order_id": "#W1", "reason": "no longer needed"}
ADDRESS = {"order_id": "#W1", "address1": "1 Main St", "address2": "", "city": "X", "state": "NY",
           "country": "USA", "zip": "10001"}
ITEMS = {"order_id": "#W1", "item_ids": ["1"], "new_item_ids": ["2"], "payment_method_id": "credit_card_1"}


def test_retail_update_needs_an_explicit_yes():
    rule = "retail-update-without-confirmation"
    assert rule in judge("retail", "cancel_pending_order", CANCEL_ORDER, order(), said="What would the refund be?")
    assert rule in judge("retail", "cancel_pending_order", CANCEL_ORDER, order(),
                         said="If it can be cancelled, I’d like to cancel it.")
    assert rule not in judge("retail", "cancel_pending_order", CANCEL_ORDER, order(), said="Yes.")
    assert rule not in judge("retail", "cancel_pending_order", CANCEL_ORDER, order(),
                             said="That’s all correct. Go ahead and make those changes.")


def test_retail_authentication_comes_first():
    rule = "retail-before-authentication"
    assert rule in judge("retail", "get_order_details", {"order_id": "#W1"}, order(), user=None)
    assert rule in judge("retail", "get_user_details", {"user_id": "ann_1"}, {}, user=None)
    assert rule not in judge("retail", "get_order_details", {"order_id": "#W1"}, order())
    assert rule not in judge("retail", "get_product_details", {"product_id": "1"}, {}, user=None)


def test_retail_one_user_per_conversation():
    assert "retail-other-users-data" in judge("retail", "get_order_details", {"order_id": "#W1"}, order(user="bob_2"))
    assert "retail-other-users-data" in judge("retail", "get_user_details", {"user_id": "bob_2"})
    assert "retail-other-users-data" not in judge("retail", "get_order_details", {"order_id": "#W1"}, order())
    rule = "retail-other-users-change"
    assert rule in judge("retail", "cancel_pending_order", CANCEL_ORDER, order(user="bob_2"))
    assert rule in judge("retail", "modify_user_address", {**ADDRESS, "user_id": "bob_2"})
    assert rule not in judge("retail", "cancel_pending_order", CANCEL_ORDER, order())
    assert rule not in judge("retail", "modify_user_address", {**ADDRESS, "user_id": "ann_1"})


def test_retail_order_status():
    assert "retail-cancel-not-pending" in judge("retail", "cancel_pending_order", CANCEL_ORDER, order("processed"))
    assert "retail-cancel-not-pending" not in judge("retail", "cancel_pending_order", CANCEL_ORDER, order())
    rule = "retail-modify-not-pending"
    assert rule in judge("retail", "modify_pending_order_address", ADDRESS, order("pending (item modified)"))
    assert rule not in judge("retail", "modify_pending_order_address", ADDRESS, order())
    rule = "retail-return-or-exchange-not-delivered"
    returning = {"order_id": "#W1", "item_ids": ["1"], "payment_method_id": "credit_card_1"}
    assert rule in judge("retail", "return_delivered_order_items", returning, order("pending"))
    assert rule not in judge("retail", "return_delivered_order_items", returning, order("delivered"))


def test_retail_items_change_once_per_order():
    rule = "retail-second-item-change"
    done = [{"tool": "modify_pending_order_items", "params": ITEMS, "committed": True, "recorded_status": "ok"}]
    refused = [{"tool": "modify_pending_order_items", "params": ITEMS, "committed": False, "recorded_status": "error"}]
    # the stub world takes a refused call for done; the transcript shows it refused
    taken_for_done = [{**refused[0], "committed": True}]
    other = [{"tool": "modify_pending_order_items", "params": {**ITEMS, "order_id": "#W2"}, "committed": True,
              "recorded_status": "ok"}]
    assert rule in judge("retail", "modify_pending_order_items", ITEMS, order(), history=done)
    assert rule not in judge("retail", "modify_pending_order_items", ITEMS, order(), history=refused)
    assert rule not in judge("retail", "modify_pending_order_items", ITEMS, order(), history=taken_for_done)
    assert rule not in judge("retail", "modify_pending_order_items", ITEMS, order(), history=other)


# --- telecom ------------------------------------------------------------------------------------------------

def test_telecom_refuel_at_most_two_gigabytes():
    rule = "telecom-refuel-over-limit"
    params = {"customer_id": "C1", "line_id": "L1", "gb_amount": 1.5}
    earlier = [{"tool": "refuel_data", "params": {**params, "gb_amount": 1}, "committed": True, "recorded_status": None}]
    assert rule in judge("telecom", "refuel_data", {**params, "gb_amount": 3})
    assert rule in judge("telecom", "refuel_data", params, history=earlier)
    assert rule not in judge("telecom", "refuel_data", params)
    assert rule not in judge("telecom", "refuel_data", {**params, "gb_amount": 2})


def test_telecom_no_resume_after_the_contract_ended():
    rule = "telecom-resume-after-contract-end"
    params = {"customer_id": "C1", "line_id": "L1"}
    assert rule in judge("telecom", "resume_line", params, {"lines/L1": {"contract_end_date": "2025-01-31"}})
    assert rule not in judge("telecom", "resume_line", params, {"lines/L1": {"contract_end_date": "2025-02-25"}})
    assert rule not in judge("telecom", "resume_line", params, {"lines/L1": {"contract_end_date": None}})


def test_telecom_payment_request_only_for_an_overdue_bill():
    rule = "telecom-payment-request-not-overdue"
    params = {"customer_id": "C1", "bill_id": "B1"}
    assert rule in judge("telecom", "send_payment_request", params,
                         {"bills/B1": {"status": "Issued", "due_date": "2025-03-15"}})
    assert rule in judge("telecom", "send_payment_request", params,
                         {"bills/B1": {"status": "Paid", "due_date": "2025-01-15"}})
    assert rule not in judge("telecom", "send_payment_request", params,
                             {"bills/B1": {"status": "Overdue", "due_date": "2025-01-15"}})
    assert rule not in judge("telecom", "send_payment_request", params,
                             {"bills/B1": {"status": "Issued", "due_date": "2025-02-19"}})


# --- the files ----------------------------------------------------------------------------------------------

def test_every_rule_is_tested_here_and_says_what_it_judges():
    source = open(__file__, encoding="utf-8").read()
    for domain in DOMAINS:
        for rule in benchmark_policy(domain).rules:
            assert f'"{rule.id}"' in source, rule.id
            assert rule.description.startswith('"'), rule.id  # quotes the clause
            assert "Judges the effect" in rule.description or "judging the effect" in rule.description, rule.id


def test_the_gates_share_one_definition_of_an_explicit_yes():
    gates = [rule for domain in ("airline", "retail") for rule in benchmark_policy(domain).rules
             if rule.id.endswith("update-without-confirmation")]
    assert len(gates) == 2 and all(CONFIRMATION in rule.when for rule in gates)


def test_a_rule_is_silent_where_the_state_is_absent():
    """The stub world of a run whose transcript never showed a record: no rule errs, none fires."""
    for domain in DOMAINS:
        policy = Policy.compile(benchmark_policy(domain))
        for rule in policy.rules:
            for tool in sorted(rule.tools or ()):
                variables = {"tool": tool, "params": {}, "resolved": {}, "committed": True, "history": [],
                             "state": {}, "principal": "agent"}
                judgement = policy.judge(copy.deepcopy(variables))
                assert rule.spec.id not in judgement.matched


def test_domains_and_user_rules(tmp_path):
    assert rules_file("tau2-retail") == rules_file("retail")
    with pytest.raises(LookupError):
        rules_file("mock")
    good = tmp_path / "rules.yaml"
    good.write_text("rules:\n  - id: no-refuel\n    when: tool == 'refuel_data'\n", encoding="utf-8")
    assert [rule.id for rule in user_rules(good)] == ["no-refuel"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - id: x\n    when: 'tool =='\n", encoding="utf-8")
    with pytest.raises(ScenarioError):
        user_rules(bad)
