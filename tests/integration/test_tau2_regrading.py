"""τ²-bench's own reward, replayed: the 280 real simulations kept beside the checkout
(``../shared/fixtures/external/tau2-bench-runs/``: airline, retail, telecom with a user simulator that calls
the user's own tools, telecom solo) replayed into τ²-bench's own environments.

Every recorded call of a known tool replays; τ²'s reward on the replay agrees with the recorded one on at
least 99 % of the runs τ² evaluated, component by component, and every disagreement is listed in
:data:`EXPLAINED` with its cause (a new one fails, and so does a listed one that no longer disagrees). The
record-level database check is τ²'s hash comparison (checked on a sample), and replaying leaves the
environment shared by every run as τ² built it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("tau2")

from litmus_replay.adapters import load_trajectories  # noqa: E402
from litmus_replay.envs.bridges import tau2 as bridge  # noqa: E402
from litmus_replay.replay.analysis import analyse  # noqa: E402
from litmus_replay.replay.bridges.tau2 import Tau2Worlds  # noqa: E402
from litmus_replay.replay.engine import Replayer  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
RUNS = ROOT.parent / "shared" / "fixtures" / "external" / "tau2-bench-runs"
pytestmark = pytest.mark.skipif(not RUNS.is_dir(), reason="the τ²-bench simulations kept beside the checkout are not here")

# Simulation id -> check -> why the replayed check differs from the recorded one. Empty: none differs.
EXPLAINED: dict[str, dict[str, str]] = {}
AGREEMENT = 0.99


@pytest.fixture(scope="module")
def replayed():
    provider = Tau2Worlds()
    out = []
    for path in sorted(RUNS.glob("*.json")):
        for trajectory in load_trajectories(path, "tau2-bench"):
            world = provider.world_for(trajectory)
            replay = Replayer(world.policy).replay(trajectory, world.world, world.key)
            out.append((world, analyse(replay)))
    return out


def test_every_recorded_call_of_a_known_tool_replays(replayed):
    assert len(replayed) == 280
    unknown, unreplayed = [], []
    for world, analysis in replayed:
        for call in analysis.replay.calls:
            if call.call.tool not in world.tools:
                unknown.append((analysis.replay.trajectory.id, call.key, call.call.tool))
            elif call.real is None or call.harness_error or call.unknown_tool:
                unreplayed.append((analysis.replay.trajectory.id, call.key, call.harness_error))
    assert unreplayed == []
    assert unknown == []  # every recorded tool is one of τ²'s


def test_taus_own_reward_on_the_replay_agrees_with_the_recorded_one(replayed):
    evaluated = [analysis for _, analysis in replayed if analysis.checks]
    cut_short = [analysis for _, analysis in replayed if analysis.replay.trajectory.incomplete]
    assert len(evaluated) + len(cut_short) == 280 and len(cut_short) == 6  # τ² evaluated nothing in those
    disagreements = {analysis.replay.trajectory.id: {name: entry for name, entry in analysis.checks.items()
                                                     if not entry["agree"]}
                     for analysis in evaluated}
    disagreements = {run: found for run, found in disagreements.items() if found}
    for run, found in disagreements.items():
        for name, entry in found.items():
            assert entry["explanation"] and ("diff" in entry or entry["first_departure"] is None), (run, name)
    unexplained = {run: sorted(found) for run, found in disagreements.items()
                   if sorted(found) != sorted(EXPLAINED.get(run, {}))}
    assert unexplained == {}, {run: {name: (entry["recorded"], entry["replayed"], entry["explanation"])
                                     for name, entry in disagreements[run].items()} for run in unexplained}
    resolved = sorted(set(EXPLAINED) - set(disagreements))
    assert resolved == [], f"explained disagreements that no longer disagree (remove them): {resolved}"
    rewards = [analysis.checks["reward"]["agree"] for analysis in evaluated]
    assert sum(rewards) / len(rewards) >= AGREEMENT
    # the components τ² does not re-check here are named, never counted as agreeing
    airline = next(analysis for analysis in evaluated if analysis.replay.trajectory.task.startswith("tau2-bench/airline/"))
    assert airline.checks["reward"]["not_rechecked"] == {"communicate_checks": 1.0}


def test_a_real_user_simulators_call_runs_as_the_users_own_tool(replayed):
    user_calls = [(analysis.replay.trajectory.id, call) for _, analysis in replayed for call in analysis.replay.calls
                  if call.call.principal == "user"]
    assert user_calls and all(call.real.status in ("ok", "error") for _, call in user_calls)
    changed = [call for _, call in user_calls if call.real.committed
               and any(resource.startswith("tau2-telecom:user/device") for resource in call.real.effects.affected)]
    assert changed, "a user's call that changed the user's device"
    value = changed[0].real.effects.values["tau2-telecom:user/device"]
    assert value["before"] != value["after"]


def test_a_refused_call_an_action_check_credited_is_a_proposal_time_credit(replayed):
    credits = {analysis.replay.trajectory.id: analysis.checks["actions"]["proposal_time_credits"]
               for _, analysis in replayed if analysis.checks and "proposal_time_credits" in analysis.checks.get("actions", {})}
    assert credits["151ab678-015e-4b1d-824b-8e30afc5d274"] == [{"action": "12_4", "call": "t10.c1"}]
    (analysis,) = [analysis for _, analysis in replayed if analysis.replay.trajectory.id == "151ab678-015e-4b1d-824b-8e30afc5d274"]
    call = next(call for call in analysis.replay.calls if call.key == "t10.c1")
    assert call.call.tool == "return_delivered_order_items" and call.real.status == "error" and not call.real.committed


def test_the_record_level_database_check_is_taus_hash_comparison(replayed):
    """On a sample of airline and retail runs (both database verdicts): τ²'s own hashes of the whole
    databases, the replayed environment's and the gold one's, built by τ²'s tools from scratch."""
    sample = []
    for world, analysis in replayed:
        domain = world.key.split("/")[1]
        if domain in ("airline", "retail") and analysis.checks and "db" in analysis.checks:
            sample.append((domain, world, analysis))
    matches = [item for item in sample if item[2].checks["db"]["replayed"]][:3]
    differ = [item for item in sample if not item[2].checks["db"]["replayed"]][:3]
    assert matches and differ
    for domain, world, analysis in matches + differ:
        section = world.world[bridge.domain_name(domain)]
        template = bridge.task_template(domain, section["task"])
        replay = bridge.tau2_modules()[domain].get_environment()
        for call in analysis.replay.calls:
            try:
                replay.make_tool_call(call.call.tool, requestor="assistant", **call.call.arguments)
            except Exception:
                pass
        gold = bridge.tau2_modules()[domain].get_environment()
        for action in template.task.evaluation_criteria.actions or []:
            try:
                gold.make_tool_call(action.name, requestor=action.requestor, **action.arguments)
            except Exception:
                pass
        assert (replay.get_db_hash() == gold.get_db_hash()) is analysis.checks["db"]["replayed"], analysis.replay.trajectory.id


def test_replaying_leaves_the_shared_environment_as_tau_built_it(replayed):
    for domain in ("airline", "retail"):
        shared = bridge._domain_environment(domain).tools.db.model_dump()
        fresh = bridge.tau2_modules()[domain].get_environment().tools.db.model_dump()
        assert shared == fresh, domain


def test_revalidate_needs_no_worlds_and_prints_the_agreement(tmp_path):
    """The command the docs show, on all 280 simulations, with two workers."""
    command = [sys.executable, "-m", "litmus_replay", "revalidate", str(RUNS), "--format", "tau2-bench",
               "--out", str(tmp_path / "out"), "--runtime", "inprocess", "--jobs", "2", "--reports", "none"]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 280 and {line["status"] for line in lines} == {"ok"}
    assert sum(1 for line in lines if line.get("incomplete")) == 6
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    reward = summary["checks"]["agreement"]["reward"]
    assert reward["runs"] == 274 and reward["agree"] / reward["runs"] >= AGREEMENT
    assert "agreement with the benchmark's own checks" in done.stdout


def test_values_told_after_the_call_are_those_learnt_before_it(monkeypatch):
    """The domain tells a call's values before it afterwards (``Domain.values_at``): on every call of the 280
    simulations, the effects are those the world's own learning of every value before each call gives."""
    from litmus_replay.envs import World

    provider = Tau2Worlds()
    runs = [trajectory for path in sorted(RUNS.glob("*.json")) for trajectory in load_trajectories(path, "tau2-bench")]

    def effects(remembers: bool) -> list[dict]:
        monkeypatch.setattr(bridge.Tau2Real, "remembers_values", remembers)
        out = []
        for trajectory in runs:
            world = World(provider.world_for(trajectory).world, "real")
            for _, call in trajectory.calls():
                outcome = world.apply({"tool": call.tool, "params": call.arguments, "principal": call.principal or "agent"})
                out.append(outcome.effects.to_dict())
        return out

    told, learnt = effects(True), effects(False)
    assert len(told) == 3866 and sum(1 for entry in told if entry["counts"]["total"]) > 800
    assert told == learnt


# The runs τ²'s reward gives full credit although a critical rule's change was committed, each read by hand
# (simulation id prefix -> the committed change and why the policy forbids it).
CREDITED_DESPITE_POLICY = {
    "0808339d": "airline task 37: cancel_reservation of NQNU5R, whose flights had both landed ('If any portion "
                "of the flight has already been flown, the agent cannot help'); τ²'s own expected actions cancel it",
    "07a19ead": "retail: modify_pending_order_address after modify_pending_order_items ('The agent will not be "
                "able to modify or cancel the order anymore'); τ²'s tool accepts 'pending (item modified)'",
    "61f72b27": "retail: the same, the address changed after the items",
    "ccd1d8d2": "retail: the same, the address changed after the items",
    "65cd4cb0": "telecom: resume_line of L1002, whose contract ended 2025-01-31 ('You are not allowed to lift "
                "the suspension if the line's contract end date is in the past'); the reward checks the user's "
                "service status and the transfer, not the line",
    "175b5fa4": "telecom: the same suspension lifted",
    "2cec4b00": "telecom: the same suspension lifted",
    "333e6cc0": "telecom: the same suspension lifted",
    "0aa7ff25": "telecom solo: the same suspension lifted",
    "af122e8f": "telecom solo: the same suspension lifted",
}


def test_the_runs_the_reward_credits_despite_a_committed_violation_are_the_ones_read_by_hand(replayed):
    flagged = {analysis.replay.trajectory.id[:8]: analysis.verdict.sentence for _, analysis in replayed
               if analysis.verdict is not None and analysis.verdict.finding == "check_missed_harm"}
    assert sorted(flagged) == sorted(CREDITED_DESPITE_POLICY), flagged
    # a failing reward never says the harm happened: τ² scores a task failed for other reasons too
    assert not any(analysis.verdict is not None and analysis.verdict.finding == "check_without_harm"
                   for _, analysis in replayed)
