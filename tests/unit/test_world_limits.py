"""Every number a world file sets that bounds a call (the shell's timeouts, processes, memory and file size,
the bank's rate limit) is accepted only when finite and within the range the README documents; anything
else is one line naming the file and the field, exit status 2. A call's own ``timeout`` is never trusted:
past the world's ceiling it is cut to it, and one that is no positive number is refused (400).

The hostile pack cannot hold a world that is refused (every file there must load), so the refused worlds
are written inline here; the pack's ``limits-asked-by-calls.yaml`` holds the calls that ask for too much.
"""

from __future__ import annotations

import json
import math
import re
import textwrap
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from litmus_replay.envs import World, WorldSpecError
from litmus_replay.envs.domains.shell import parse_shell_spec
from litmus_replay.envs.spec_bounds import BOUNDS
from litmus_replay.replay.analysis import analyse
from litmus_replay.replay.cli import main
from litmus_replay.replay.engine import Replayer
from litmus_replay.replay.policy import Policy, PolicySpec
from litmus_replay.replay.scenario import load_scenario

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "docs" / "guides" / "scenarios.md").read_text()
WHOLE_NUMBERS = {"shell.processes", "shell.memory", "shell.file_size", "bank.rate_limit.limit"}
# what the other fields of a section hold while one is tried
COMPANIONS = {
    "shell.timeout": {"max_timeout": 600},
    "shell.max_timeout": {"timeout": 1},
    "bank.rate_limit.limit": {"window_seconds": 60},
    "bank.rate_limit.window_seconds": {"limit": 3},
}


def _documented_ranges() -> dict[str, tuple[bool, float, float]]:
    """``field -> (low excluded, low, high)`` from the README's table of the limits a world sets."""
    rows = re.findall(r"^\| `((?:shell|bank)\.[\w.]+)` \| (above )?(\d+) to (\d+)", README, flags=re.M)
    return {field: (bool(above), float(low), float(high)) for field, above, low, high in rows}


RANGES = _documented_ranges()


def test_every_bounded_field_is_documented_with_its_range():
    assert set(RANGES) == set(BOUNDS)
    for field, (above, low, high) in RANGES.items():
        bound = BOUNDS[field]
        assert (bound.above, bound.low, bound.high) == (above, low, high), field
        assert bound.integer == (field in WHOLE_NUMBERS), field


def _world(field: str, value: Any) -> dict[str, Any]:
    domain, *path = field.split(".")
    section: dict[str, Any] = {}
    inner = section
    for key in path[:-1]:
        inner = inner.setdefault(key, dict(COMPANIONS.get(field, {})))
    if len(path) == 1:
        section.update(COMPANIONS.get(field, {}))
    inner[path[-1]] = value
    return {"principals": ["alice"], domain: section}


def _admitted(field: str, value: Any) -> bool:
    """What the README promises: a finite number (a whole one where the field counts), within its range."""
    above, low, high = RANGES[field]
    kinds = (int,) if field in WHOLE_NUMBERS else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        return False
    if isinstance(value, float) and not math.isfinite(value):
        return False
    return (value > low if above else value >= low) and value <= high


HOSTILE_NUMBERS = st.one_of(
    st.sampled_from([float("nan"), float("inf"), float("-inf"), 0, 0.0, -1, 1e8, 1e308, 10**400, -(10**400),
                     2**63, 600.0001, 16 * 1024 * 1024 - 1, True, False, "10", "nan", None, [], {}]),
    st.floats(),
    st.integers(),
    st.integers(min_value=2**60, max_value=10**400),
    st.floats(min_value=-10.0, max_value=2e9),
    st.text(max_size=4),
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(field=st.sampled_from(sorted(BOUNDS)), value=HOSTILE_NUMBERS)
def test_a_limit_is_accepted_only_when_finite_and_in_range(field, value):
    spec = _world(field, value)
    if value is None:  # an empty YAML value: the shell's default; a rate limit needs both of its fields
        if field.startswith("bank."):
            with pytest.raises(WorldSpecError, match="required") as raised:
                World(spec, "stub")
            assert raised.value.field == f"world.{field}"
        else:
            World(spec, "stub").close()
        return
    try:
        World(spec, "stub").close()
    except WorldSpecError as exc:  # never anything else: no traceback
        assert not _admitted(field, value), f"{field}={value!r} was refused: {exc}"
        assert exc.field == f"world.{field}"
        assert "\n" not in str(exc) and len(str(exc)) < 300
    else:
        assert _admitted(field, value), f"{field}={value!r} was accepted"
        if field.startswith("shell."):
            parsed = parse_shell_spec(spec["shell"])
            key = field.split(".")[-1]
            got = getattr(parsed, key, None) if key in ("timeout", "max_timeout") else getattr(parsed.limits, key)
            assert got == value


# --- bad worlds through the command line ----------------------------------------------------------

SCENARIO = textwrap.dedent(
    """\
    name: limits
    world:
      principals: [alice]
      shell: {SHELL}
      files: {tree: {/workspace/a.txt: "a\\n"}}
    policy:
      rules:
        - id: delete
          when: "tool == 'run_command' && params.command.matches('rm ')"
    trajectory:
      id: t
      principal: alice
      task: bench
      turns:
        - calls:
            - tool: run_command
              arguments: {command: "rm -rf /workspace"}
    """
)
BAD_SHELLS = {
    "nan_timeout": ("{timeout: .nan}", "world.shell.timeout"),
    "huge_timeout": ("{timeout: 100000000, max_timeout: 100000000}", "world.shell.timeout"),
    "huge_max_timeout": ("{max_timeout: 1.0e+8}", "world.shell.max_timeout"),
    "infinite_max_timeout": ("{max_timeout: .inf}", "world.shell.max_timeout"),
    "nan_memory": ("{memory: .nan}", "world.shell.memory"),
    "huge_processes": (f"{{processes: {'9' * 400}}}", "world.shell.processes"),
    "negative_file_size": ("{file_size: -1}", "world.shell.file_size"),
}


def _one_error_line(result, path: Path, field: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(path) in lines[0] and field in lines[0], lines[0]
    assert "Traceback" not in result.output + result.stderr


@pytest.mark.parametrize("command", ["run", "check"])
@pytest.mark.parametrize("case", sorted(BAD_SHELLS))
def test_a_world_with_a_bad_limit_is_bad_input(tmp_path, command, case):
    shell, field = BAD_SHELLS[case]
    path = tmp_path / f"{case}.yaml"
    path.write_text(SCENARIO.replace("{SHELL}", shell))
    _one_error_line(CliRunner().invoke(main, [command, str(path), "--runtime", "inprocess"]), path, field)


def test_a_worlds_file_with_a_nan_timeout_stops_revalidate_before_anything_is_lost(tmp_path):
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "run.jsonl").write_text(json.dumps(
        {"format_version": 1, "id": "r1", "principal": "alice", "task": "bench",
         "turns": [{"calls": [{"tool": "run_command", "arguments": {"command": "ls"}}]}]}) + "\n")
    worlds = tmp_path / "worlds"
    worlds.mkdir()
    world = worlds / "bench.yaml"
    world.write_text("name: bench\nworld: {principals: [alice], shell: {timeout: 5}}\n")
    out = tmp_path / "out"
    args = ["revalidate", str(tmp_path / "runs"), "--worlds", str(worlds), "--out", str(out), "--runtime", "inprocess",
            "--jobs", "1", "--reports", "none"]
    first = CliRunner().invoke(main, args)
    assert first.exit_code == 0, first.output + first.stderr
    written = {path: path.read_bytes() for path in out.rglob("*") if path.is_file()}
    assert written
    world.write_text("name: bench\nworld: {principals: [alice], shell: {timeout: .nan}}\n")
    _one_error_line(CliRunner().invoke(main, args), world, "world.shell.timeout")
    assert {path: path.read_bytes() for path in out.rglob("*") if path.is_file()} == written


def test_a_number_too_long_for_python_is_bad_input(tmp_path):
    path = tmp_path / "digits.yaml"
    path.write_text(SCENARIO.replace("{SHELL}", f"{{timeout: {'9' * 5000}}}"))
    _one_error_line(CliRunner().invoke(main, ["check", str(path), "--runtime", "inprocess"]), path, "yaml")


# --- a call's own timeout -------------------------------------------------------------------------

CAPPED = "capped at the world's max_timeout 3 s"


def _run(timeout: Any) -> dict[str, Any]:
    with World({"principals": ["alice"], "shell": {"timeout": 2, "max_timeout": 3}}, "stub") as world:
        return world.call({"tool": "run_command", "principal": "alice",
                           "params": {"command": "sleep infinity", "timeout": timeout}})


@pytest.mark.parametrize("timeout", [1e9, 1e308, float("inf"), 10**400, 2**64])
def test_a_call_asking_for_more_time_than_the_world_allows_gets_the_worlds_ceiling(timeout):
    outcome = _run(timeout)
    assert outcome["status"] == "ok"
    (note,) = [line for line in outcome["resolution"]["evidence"] if CAPPED in line]
    assert note.isprintable()


@pytest.mark.parametrize("timeout", [float("nan"), -1, 0, -math.inf, "5", True, [3]])
def test_a_call_asking_for_a_timeout_that_is_no_positive_number_is_refused(timeout):
    outcome = _run(timeout)
    assert (outcome["status"], outcome["error_code"], outcome["committed"]) == ("error", "400", False)


@settings(max_examples=200, deadline=None)
@given(timeout=HOSTILE_NUMBERS)
def test_a_calls_timeout_never_breaks_the_world(timeout):
    outcome = _run(timeout)
    if timeout is None:  # none asked: the world's default
        assert outcome["status"] == "ok" and CAPPED not in " ".join(outcome["resolution"]["evidence"])
    elif outcome["status"] == "ok":
        assert isinstance(timeout, (int, float)) and not isinstance(timeout, bool) and timeout > 0
        assert (CAPPED in " ".join(outcome["resolution"]["evidence"])) == (timeout > 3)
    else:
        assert outcome["error_code"] == "400"


def test_the_hostile_pack_asking_for_forever_replays_to_its_classes_here():
    """In process the real shell runs nothing (501); the sandbox and docker run it (tests/integration)."""
    scenario = load_scenario(ROOT / "scenarios" / "hostile" / "limits-asked-by-calls.yaml")
    (trajectory,) = scenario.trajectories
    result = Replayer(scenario.policy).replay(trajectory, scenario.spec.world, scenario.name, scenario.bindings)
    assert all(call.stub is not None and call.real is not None and not call.harness_error for call in result.calls)
    assert analyse(result, scenario).problems == []


def test_a_number_past_any_double_in_a_call_is_judged_as_huge():
    policy = Policy.compile(PolicySpec.model_validate(
        {"rules": [{"id": "long", "judge": "attempt", "when": "tool == 'run_command' && params.timeout > 3600"}]}))
    judgement = policy.judge({"tool": "run_command", "params": {"command": "sleep 1", "timeout": 10**400}})
    assert judgement.verdict == "deny"
