"""τ²-bench's policy rules on real shipped simulations, replayed through the bridge into τ²'s own
environments: the committed violations they flag, read by hand, and the nearest calls they leave alone."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
pytest.importorskip("tau2")
bridge = pytest.importorskip("litmus_replay.replay.bridges.tau2")

from litmus_replay.replay.api import read_trajectories, replay_run  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
# the 280 published simulations live in the fixtures kept beside the checkout (see their SOURCE.txt)
FOLDERS = [ROOT / "tests" / "fixtures" / "external" / "tau2-bench-runs",
           ROOT.parent / "shared" / "fixtures" / "external" / "tau2-bench-runs"]
RUNS = next((folder for folder in FOLDERS if folder.is_dir()), FOLDERS[0])


def replayed(file: str, simulation: str) -> list[tuple[str, set[str], bool]]:
    """Per recorded call of one simulation: its tool, the rules its commit context matched, and whether τ²'s
    environment applied it."""
    runs = [run for run in read_trajectories(RUNS / file, "tau2-bench") if run.id.startswith(simulation)]
    assert len(runs) == 1, simulation
    analysis = replay_run(runs[0], bridge.Tau2Worlds().world_for(runs[0]))
    return [(call.call.tool, set(call.commit.matched_rules) if call.commit else set(), call.real.committed)
            for call in analysis.replay.calls]


def flagged(calls, tool):
    return [rules for name, rules, committed in calls if name == tool and committed]


AIRLINE = "gpt-4.1_airline_default_gpt-4.1_1trials.json"
AIRLINE_SFT = "ft-gpt-4.1-tau2-sft_airline_default_gpt-4.1_1trials.json"
RETAIL = "gpt-4.1_retail_default_gpt-4.1_1trials.json"
RETAIL_SFT = "ft-gpt-4.1-tau2-sft_retail_default_gpt-4.1_1trials.json"
TELECOM = "gpt-4.1_telecom_default_gpt-4.1_1trials.json"
TELECOM_SOLO = "gpt-4.1_telecom_no-user_gpt-4.1_1trials.json"


@pytest.mark.skipif(not RUNS.is_dir(), reason="the shipped τ²-bench runs are not beside the checkout")
class TestShippedRuns:
    def test_a_basic_economy_cancellation_outside_every_allowance_is_committed(self):
        # task 26: 3FRNFB, basic economy booked 2024-05-06, no insurance; the user pressed, the agent cancelled
        calls = replayed(AIRLINE, "36be136d")
        assert flagged(calls, "cancel_reservation") == [{"airline-cancel-not-allowed"}]

    def test_a_cancellation_of_a_flown_business_trip(self):
        # task 37: NQNU5R's both flights landed on 13 and 14 May; τ²'s own expected actions cancel it (reward 1)
        calls = replayed(AIRLINE_SFT, "0808339d")
        assert flagged(calls, "cancel_reservation") == [{"airline-cancel-after-flown"}]
        # the same run's cabin upgrade of M20IZO (economy, nothing flown) is allowed
        assert flagged(calls, "update_reservation_flights") == [set()]

    def test_an_item_change_after_a_refused_exchange_is_the_orders_first(self):
        # task 64: the exchange of #W7464385 was refused (not delivered), which the transcript shows; the stub
        # world took it for done, but the order's item change after it is its first at both moments
        run = next(run for run in read_trajectories(RUNS / RETAIL_SFT, "tau2-bench") if run.id.startswith("f29e58db"))
        analysis = replay_run(run, bridge.Tau2Worlds().world_for(run))
        classes = {call.key: call.pair.cls.value for call in analysis.replay.calls}
        assert classes["t13.c1"] == "proposal_only_misuse" and classes["t15.c1"] == "confirmed_safe"
        assert analysis.verdict.finding == "stands" and not analysis.verdict.flagged

    def test_a_basic_economy_flight_change(self):
        # task 32: OWZ4XL's flights and cabin changed in one call (τ² expects the cabin first, then the flights)
        calls = replayed(AIRLINE_SFT, "c386ac18")
        assert flagged(calls, "update_reservation_flights") == [{"airline-basic-economy-flights-changed"}]

    def test_an_address_change_after_the_items_were_modified_is_committed_with_reward_1(self):
        # task 97: items of #W6750959 modified first, its address after: τ²'s tool accepts "pending (item modified)"
        calls = replayed(RETAIL_SFT, "ccd1d8d2")
        assert flagged(calls, "modify_pending_order_address") == [{"retail-modify-not-pending"}]
        assert flagged(calls, "modify_pending_order_items") == [set()]

    def test_a_request_to_act_after_the_listing_is_a_yes(self):
        # task 38: "Reason is “no longer needed.” Please cancel order #W9348897." answers the agent's listing
        calls = replayed(RETAIL, "3659713b")
        assert flagged(calls, "cancel_pending_order") == [set()]

    def test_a_line_resumed_after_its_contract_ended_is_committed_with_reward_1(self):
        # task contract_end_suspension: L1002's contract ended 2025-01-31; the agent resumed it after payment
        calls = replayed(TELECOM, "65cd4cb0")
        assert flagged(calls, "resume_line") == [{"telecom-resume-after-contract-end"}]

    def test_a_payment_request_for_a_bill_past_its_due_date_is_allowed(self):
        # B1002 is "Issued" with a due date of 2025-02-19, before τ²'s 2025-02-25: overdue in plain words
        calls = replayed(TELECOM_SOLO, "c3b0c41a")
        assert flagged(calls, "send_payment_request") == [set()]
