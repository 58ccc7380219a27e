"""What reading ``state`` and aggregating ``history`` cost a replay.

Replays every trajectory of scenarios/core, as the engine does, three ways: with each scenario's policy
as written; with one more rule that reads ``state`` (so every call of both worlds brings the world's view
back with its outcome, in the same round trip); and with one more rule that totals ``history`` with
``sum`` and ``count_by``. Prints calls per second for each, with the real world in-process and, where it
can run here, in the sandbox, and this process's CPU time per call (steadier than wall time on a busy
machine; it leaves out the sandboxed env server's own work).

Run: python benchmarks/policy_state.py [--repeat 20] [--sandbox-repeat 3]
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

from litmus_replay.envs import RuntimeUnavailable
from litmus_replay.envs.runtime import Runtime, get_runtime
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.policy import Policy, PolicySpec, RuleSpec
from litmus_replay.replay.scenario import Scenario, find_scenarios, load_scenario

PACK = Path(__file__).resolve().parent.parent / "scenarios" / "core"
EXTRA = {
    "as written": None,
    "+ a rule reading state": "state.size() < 0",
    "+ a rule totalling history": "sum(history, 'resolved.amount') < 0 && get(count_by(history, 'tool'), [tool], 0) < 0",
}


def _policy(scenario: Scenario, extra: str | None) -> Policy:
    rules = [rule.spec for rule in scenario.policy.rules]
    if extra is not None:
        rules.append(RuleSpec(id="bench-extra", when=extra))
    return Policy.compile(PolicySpec(rules=rules))


def throughput(scenarios: list[Scenario], extra: str | None, real: Runtime, repeat: int) -> tuple[int, float, float]:
    """Calls replayed, wall seconds, and this process's CPU seconds."""
    replayers = [(scenario, Replayer(_policy(scenario, extra), real_runtime=real)) for scenario in scenarios]
    calls = 0
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(repeat):
        for scenario, replayer in replayers:
            for trajectory in scenario.trajectories:
                calls += len(replayer.replay(trajectory, scenario.spec.world, scenario.name).calls)
    return calls, time.perf_counter() - start, time.process_time() - cpu


def report(label: str, scenarios: list[Scenario], real: Runtime, repeat: int) -> None:
    throughput(scenarios, None, real, 1)  # warm: imports, a reused sandbox
    base = None
    for name, extra in EXTRA.items():
        calls, seconds, cpu = throughput(scenarios, extra, real, repeat)
        per_call = cpu / calls * 1e3
        base = base or per_call
        print(f"{label:<10}{name:<30}{calls:>7}{seconds:>9.2f}{calls / seconds:>10,.0f}{per_call:>12.2f}{per_call / base:>10.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="times to replay the pack in-process")
    parser.add_argument("--sandbox-repeat", type=int, default=3, help="times to replay it with a sandboxed real world")
    args = parser.parse_args()
    print(f"# {Path(sys.argv[0]).name} --repeat {args.repeat} --sandbox-repeat {args.sandbox_repeat}")
    print(f"# python {platform.python_version()} on {platform.machine()}; stub worlds in-process")
    scenarios = [load_scenario(path) for path in find_scenarios([PACK])]
    print(f"{'real':<10}{'policy':<30}{'calls':>7}{'seconds':>9}{'calls/s':>10}{'cpu ms/call':>12}{'vs first':>10}")
    with get_runtime("inprocess") as inprocess:
        report("inprocess", scenarios, inprocess, args.repeat)
    try:
        sandbox = get_runtime("sandbox")
    except RuntimeUnavailable as exc:
        print(f"sandbox   unavailable here: {exc}")
        return
    with sandbox:
        report("sandbox", scenarios, sandbox, args.sandbox_repeat)


if __name__ == "__main__":
    main()
