"""The shell domain without a sandbox: its spec, the stub replaying recorded output, the real shell
refusing to run anywhere but an isolated world, and the swallowed-error prelude (run here on trusted
commands of the test's own, never on recorded content)."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from litmus_replay.envs import World, WorldSpecError
from litmus_replay.envs.domains.shell import DEFAULT_MAX_TIMEOUT, DEFAULT_TIMEOUT, PRELUDE, REFUSAL, parse_shell_spec


def _call(world: World, command, principal: str = "alice", recorded=None, **params) -> dict:
    request = {"tool": "run_command", "params": {"command": command, **params}, "principal": principal}
    if recorded is not None:
        request["recorded"] = recorded
    return world.call(request)


# --- the spec ---------------------------------------------------------------------------------------


def test_spec_defaults():
    spec = parse_shell_spec({})
    assert (spec.timeout, spec.max_timeout, spec.workspace) == (DEFAULT_TIMEOUT, DEFAULT_MAX_TIMEOUT, "/workspace")


@pytest.mark.parametrize(
    "section, field",
    [
        ({"timeout": 0}, "world.shell.timeout"),
        ({"timeout": "10"}, "world.shell.timeout"),
        ({"timeout": 30, "max_timeout": 10}, "world.shell.timeout"),
        ({"max_timeout": True}, "world.shell.max_timeout"),
        ({"workspace": "relative"}, "world.shell.workspace"),
        ({"processes": 1.5}, "world.shell.processes"),
        ({"colour": "blue"}, "world.shell.colour"),
    ],
)
def test_spec_errors_name_the_field(section, field):
    with pytest.raises(WorldSpecError) as raised:
        World({"principals": ["alice"], "shell": section}, "stub")
    assert raised.value.field == field


def test_a_long_default_timeout_raises_the_ceiling():
    assert parse_shell_spec({"timeout": 25}).max_timeout == 25


# --- the stub ---------------------------------------------------------------------------------------


@pytest.fixture
def stub():
    with World({"principals": ["alice"], "shell": {}}, "stub") as world:
        yield world


def test_stub_replays_a_recorded_dict(stub):
    recorded = {"status": "ok", "output": {"exit_code": 3, "stdout": "x", "stderr": "y", "truncated": False}}
    outcome = _call(stub, "make", recorded=recorded)
    assert outcome["status"] == "ok" and outcome["output"] == recorded["output"]


def test_stub_takes_a_recorded_string_as_stdout(stub):
    outcome = _call(stub, "ls", recorded={"status": "ok", "output": "a\nb\n"})
    assert outcome["output"] == {"exit_code": 0, "stdout": "a\nb\n", "stderr": "", "truncated": False}


def test_stub_turns_a_recorded_error_into_500(stub):
    outcome = _call(stub, "ls", recorded={"status": "error", "error": "command not found"})
    assert (outcome["status"], outcome["error_code"], outcome["error"]) == ("error", "500", "command not found")


def test_stub_without_a_recording_succeeds_empty(stub):
    outcome = _call(stub, "rm -rf /")
    assert outcome["status"] == "ok" and outcome["committed"]
    assert outcome["output"] == {"exit_code": 0, "stdout": "", "stderr": "", "truncated": False}
    assert outcome["effects"]["counts"]["total"] == 0


@pytest.mark.parametrize("params", [{"command": 7}, {"command": "ls", "timeout": -1}, {"command": "ls", "timeout": "5"},
                                    {"command": "a\0b"}])
def test_bad_arguments_are_400(stub, params):
    outcome = stub.call({"tool": "run_command", "params": params, "principal": "alice"})
    assert outcome["error_code"] == "400"


# --- the real shell refuses outside an isolated runtime -----------------------------------------------


def test_real_shell_refuses_in_process_and_runs_nothing(tmp_path):
    marker = tmp_path / "ran"
    with World({"principals": ["alice"], "shell": {}}, "real") as world:
        outcome = _call(world, f"touch {marker}")
        assert (outcome["status"], outcome["error_code"], outcome["error"]) == ("error", "501", REFUSAL)
        assert not outcome["committed"]
    assert not marker.exists()
    assert "--runtime sandbox" in REFUSAL and "--runtime docker" in REFUSAL


# --- the swallowed-error prelude -----------------------------------------------------------------------

BASH = shutil.which("bash")


def _swallowed(command: str) -> tuple[int, list[str]]:
    """Run a trusted test command after the prelude; return its status and what the prelude reported."""
    read, write = os.pipe()
    os.dup2(write, 62)
    os.close(write)
    try:
        completed = subprocess.run([BASH, "--noprofile", "--norc", "-c", PRELUDE + command], pass_fds=(62,),
                                   stdin=subprocess.DEVNULL, capture_output=True, timeout=20)
    finally:
        os.close(62)
    with os.fdopen(read) as reader:
        return completed.returncode, reader.read().splitlines()


@pytest.mark.skipif(BASH is None, reason="needs bash")
@pytest.mark.parametrize(
    "command, reported",
    [
        ("false || true", ["`false` exited 1"]),
        ("cat /nonexistent/x 2>/dev/null; echo ok", ["`cat /nonexistent/x 2> /dev/null` exited 1"]),
        ("false | true", ["pipeline stage 1 of 2 `false` exited 1"]),
        ("false | true; echo after", ["pipeline stage 1 of 2 `false` exited 1"]),
        ("ls /nonexistent/x 2>/dev/null | wc -l", ["pipeline stage 1 of 2 `ls /nonexistent/x 2> /dev/null` exited 2"]),
        ("x=$(false); echo $x | cat", ["`x=$(false)` exited 1"]),
        ("f() { false; echo in; }; f", ["`false` exited 1"]),
        ("exec 2>/dev/null; false; echo hidden", ["`false` exited 1"]),
        ("false; false | cat; echo x", ["`false` exited 1", "pipeline stage 1 of 2 `false` exited 1"]),
    ],
)
def test_swallowed_errors_are_reported(command, reported):
    status, lines = _swallowed(command)
    assert status == 0
    assert lines == reported


@pytest.mark.skipif(BASH is None, reason="needs bash")
@pytest.mark.parametrize(
    "command, status",
    [
        ("false", 1),  # the failure is the command's status: visible, not swallowed
        ("exit 3", 3),
        ("set -o pipefail; false | true", 1),
        ("if [ -f /nonexistent/x ]; then echo y; fi; [ -e /nonexistent/x ] && echo z; echo fine", 0),
        ("grep -q x /dev/null || echo no match", 0),  # a predicate's 1 is an answer
        ("yes | head -1", 0),  # SIGPIPE ends a pipeline's producer
        ("! false; echo ok", 0),
        ("true", 0),
    ],
)
def test_answers_and_visible_failures_are_not_reported(command, status):
    assert _swallowed(command) == (status, [])


@pytest.mark.skipif(BASH is None, reason="needs bash")
def test_the_prelude_leaves_the_command_alone():
    status, lines = _swallowed("echo \"$0 $LINENO\"; trap -p EXIT | wc -l >/dev/null; echo \"${BASH_ENV:-none}\"")
    assert (status, lines) == (0, [])
    completed = subprocess.run(["bash", "--noprofile", "--norc", "-c", PRELUDE + 'echo "$0 $LINENO"; echo "$(( 6 * 7 ))"'],
                               executable=BASH, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=20)
    assert completed.stdout == "bash 1\n42\n" and completed.stderr == ""
