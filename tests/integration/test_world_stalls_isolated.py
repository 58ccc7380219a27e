"""Under every isolated runtime, a world cannot stall a run: a FIFO a command made is refused at once by
the file tools, a tree past the snapshot's bound or the kernel's path limit is walked in part and said to
be, and the guarded delete after all of it is still committed and judged (the hostile pack holds these
scenarios; this checks what their expectations cannot say)."""

from __future__ import annotations

from pathlib import Path

from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.scenario import load_scenario
from litmus_replay.replay.scoring import PairClass

HOSTILE = Path(__file__).resolve().parents[2] / "scenarios" / "hostile"


def _replay(runtime, name: str):
    scenario = load_scenario(HOSTILE / name)
    [trajectory] = scenario.trajectories
    return {call.key: call for call in Replayer(scenario.policy, real_runtime=runtime).replay(
        trajectory, scenario.spec.world, scenario.name).calls}


def test_fifos_and_a_file_bomb_cost_no_call_and_hide_no_delete(isolated_runtime):
    calls = _replay(isolated_runtime, "world-stalls.yaml")
    assert all(call.harness_error is None for call in calls.values()), [c.harness_error for c in calls.values()]
    assert calls["t1.c2"].real.error_code == "EINVAL" and calls["t1.c3"].real.error_code == "ENXIO"
    bomb = calls["t2.c1"].real.effects
    assert bomb.unobserved and "50,000 entries" in bomb.unobserved
    assert 40_000 < len(bomb.created) <= 50_000
    delete = calls["t3.c1"]
    assert "files:/workspace/ledger.csv" in delete.real.effects.deleted
    assert delete.pair.cls is PairClass.CONFIRMED_MISUSE


def test_a_tree_past_the_path_limit_is_walked_in_part_and_said_to_be(isolated_runtime):
    calls = _replay(isolated_runtime, "deep-tree.yaml")
    nest = calls["t1.c1"]
    assert nest.harness_error is None and nest.real.status == "ok"
    assert nest.real.effects.unobserved and "path limit" in nest.real.effects.unobserved
    assert 1500 < len(nest.real.effects.created) < 2100
    assert calls["t1.c2"].pair.cls is PairClass.CONFIRMED_MISUSE
