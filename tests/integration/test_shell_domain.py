"""The shell's real semantics in every isolated runtime: commands run as the principal, their effects
are the world's, swallowed errors become evidence, output is capped, a timeout kills, and nothing a
command starts outlives its call — fork bombs included. And in-process the shell refuses."""

from __future__ import annotations


import pytest

from litmus_replay.envs.domains.shell import REFUSAL, SHELL_SAYS, SWALLOWED

WORLD = {
    "principals": ["alice", "bob"],
    "shell": {"timeout": 3, "max_timeout": 4, "processes": 40},
    "files": {"tree": {"/workspace/notes.txt": "one\ntwo\n"}},
}


@pytest.fixture(scope="module")
def world(isolated_runtime):
    handle = isolated_runtime.open_world(WORLD, "real")
    yield handle
    handle.close()


def _run(handle, command: str, principal: str = "alice", **params) -> dict:
    return handle.call({"tool": "run_command", "params": {"command": command, **params}, "principal": principal})


def _evidence(outcome: dict) -> list[str]:
    return list(outcome["resolution"]["evidence"])


def _alice_processes(handle) -> list[str]:
    """alice's processes other than the probe itself (its shell and its ps)."""
    out = _run(handle, "ps -e -o user=,pid=,comm=; echo $$")["output"]["stdout"].splitlines()
    probe = out.pop()
    return [comm for user, pid, comm in (line.split() for line in out)
            if user in ("alice", "10001") and pid != probe and comm != "ps"]


def test_runs_as_the_declared_principal_in_the_workspace(world):
    outcome = _run(world, "id -u; id -g; id -G; pwd; echo $HOME; env | cut -d= -f1 | sort | tr '\\n' ' '")
    assert outcome["status"] == "ok"
    uid, gid, groups, cwd, home, names = outcome["output"]["stdout"].splitlines()
    assert (uid, gid, groups) == ("10001", "10001", "10001")
    assert cwd.endswith("/workspace") and home == cwd
    assert set(names.split()) <= {"HOME", "LANG", "PATH", "PWD", "SHLVL", "_", "OLDPWD"}
    assert _run(world, "id -u", principal="bob")["output"]["stdout"] == "10002\n"
    assert any("as alice (uid 10001, gid 10001) in /workspace" in line for line in _evidence(outcome))


def test_a_commands_effects_are_the_worlds(world):
    outcome = _run(world, "echo three >> notes.txt; echo new > made.txt; mkdir -p d/e")
    assert outcome["status"] == "ok" and outcome["committed"]
    effects = outcome["effects"]
    assert effects["created"] == ["files:/workspace/d", "files:/workspace/d/e", "files:/workspace/made.txt"]
    assert effects["changed"] == ["files:/workspace/notes.txt"]
    read = world.call({"tool": "read_file", "params": {"path": "/workspace/made.txt"}, "principal": "bob"})
    assert read["output"] == "new\n"


def test_a_failing_command_is_ok_with_its_exit_code(world):
    outcome = _run(world, "echo out; echo err >&2; exit 7")
    assert outcome["status"] == "ok"
    assert outcome["output"] == {"exit_code": 7, "stdout": "out\n", "stderr": "err\n", "truncated": False}
    assert "exit status 7" in _evidence(outcome)


def test_stdin_is_empty(world):
    outcome = _run(world, "cat; echo end")
    assert outcome["output"]["stdout"] == "end\n"


@pytest.mark.parametrize(
    "command, swallowed",
    [
        ("cat missing.txt 2>/dev/null; echo ok", "`cat missing.txt` exited 1"),
        ("ls missing 2>/dev/null | wc -l", "`ls missing` exited 2"),
        ("false | true", "a subshell of the command exited 1"),
        ("x=$(cat missing.txt 2>&1); echo \"$x\"", "`cat missing.txt` exited 1"),
        ("exec 62>&-; cp missing.txt copy.txt 2>/dev/null; echo hidden", "`cp missing.txt copy.txt` exited 1"),
        ("bash -c 'rm missing.txt 2>/dev/null; true'", "`rm missing.txt` exited 1"),
    ],
)
def test_swallowed_errors_are_seen_by_the_tracer(world, command, swallowed):
    outcome = _run(world, command)
    assert outcome["status"] == "ok" and outcome["output"]["exit_code"] == 0
    assert SWALLOWED + swallowed in _evidence(outcome)


@pytest.mark.parametrize("command", ["grep -q absent notes.txt || echo no", "yes | head -1", "[ -e nothing ] || echo no",
                                     "cat missing.txt 2>/dev/null; exit 4"])
def test_answers_pipelines_and_visible_failures_are_not_swallowed_errors(world, command):
    assert not [line for line in _evidence(_run(world, command)) if line.startswith(SWALLOWED)]


def test_the_shells_own_account_is_kept_but_unverified(world):
    outcome = _run(world, "false || true")
    assert SHELL_SAYS + "`false` exited 1" in _evidence(outcome)
    assert not [line for line in _evidence(outcome) if line.startswith(SWALLOWED)]


@pytest.mark.parametrize(
    "command, tampered",
    [
        ("printf 'swallowed error: `rm -rf /` exited 1\\n`cp a b` exited 1\\n' >&62; echo forged", None),
        ("exec 62>&-; false; echo gone", "closed"),
        ("exec 62>/dev/null; false; echo elsewhere", "replaced"),
        ("exec 63>&62; echo '`false` exited 1' >&63", "copied"),
    ],
)
def test_writing_or_closing_the_shells_channel_forges_no_swallowed_error(world, command, tampered):
    outcome = _run(world, command)
    evidence = _evidence(outcome)
    assert outcome["output"]["exit_code"] == 0
    assert not [line for line in evidence if line.startswith(SWALLOWED)], evidence
    if tampered:
        assert any(line.startswith(f"the command {tampered} its shell's report descriptor") for line in evidence)


def test_command_text_in_evidence_is_escaped(world):
    outcome = _run(world, "cp $'\\e[31mred\\x07' $'a\\u202eb' 2>/dev/null; echo")
    [line] = [line for line in _evidence(outcome) if line.startswith(SWALLOWED)]
    assert line == SWALLOWED + "`cp \\x1b[31mred\\x07 a\\u202eb` exited 1"


def test_output_is_capped_per_stream(world):
    outcome = _run(world, "head -c 100000 /dev/zero | tr '\\0' a; echo done >&2")
    assert outcome["status"] == "ok"
    assert len(outcome["output"]["stdout"]) == 64 * 1024 and outcome["output"]["truncated"] is True
    assert outcome["output"]["stderr"] == "done\n"


def test_a_flood_of_output_is_killed_with_413(world):
    outcome = _run(world, "yes")  # never ends by itself: an answer at all means it was killed
    assert (outcome["status"], outcome["error_code"]) == ("error", "413")
    assert _alice_processes(world) == []


def test_a_timeout_kills_the_command_and_answers_504(world):
    outcome = _run(world, "echo started; sleep 60", timeout=1)
    assert (outcome["status"], outcome["error_code"]) == ("error", "504")
    assert "still running after 1 s: killed" in _evidence(outcome)
    assert not outcome["committed"]
    assert _alice_processes(world) == []


def test_a_timeout_above_the_ceiling_is_capped(world):
    outcome = _run(world, "true", timeout=3600)
    assert outcome["status"] == "ok"
    assert "timeout 3600 s capped at the world's max_timeout 4 s" in _evidence(outcome)


def test_nothing_started_by_a_command_outlives_it(world):
    outcome = _run(world, "sleep 300 & setsid sleep 301 & nohup sleep 302 >/dev/null 2>&1 & disown -a; echo bg")
    assert outcome["output"]["stdout"] == "bg\n"
    assert "killed 3 process(es) the command left behind" in _evidence(outcome)
    assert _alice_processes(world) == []


def test_a_fork_bomb_is_contained(world):
    outcome = _run(world, ":(){ :|:& };:; sleep 2", timeout=1)
    assert outcome["error_code"] == "504"  # killed at its 1 s timeout, not let run to the sleep's end
    assert _alice_processes(world) == []
    assert _run(world, "echo alive")["output"]["stdout"] == "alive\n"


def test_a_missing_workspace_is_made_for_the_first_principal(isolated_runtime):
    handle = isolated_runtime.open_world({"principals": ["carol"], "shell": {"workspace": "/srv/project"}}, "real")
    try:
        outcome = _run(handle, "pwd; stat -c %u .; touch mine", principal="carol")
        cwd, owner = outcome["output"]["stdout"].splitlines()
        assert cwd.endswith("/srv/project") and owner == "10001"
        assert "files:/srv/project/mine" in outcome["effects"]["created"]
    finally:
        handle.close()


def test_the_shell_refuses_in_process(runtime_opener):
    runtime = runtime_opener("inprocess")
    handle = runtime.open_world({"principals": ["alice"], "shell": {}}, "real")
    try:
        outcome = _run(handle, "echo should-not-run")
        assert (outcome["status"], outcome["error_code"], outcome["error"]) == ("error", "501", REFUSAL)
    finally:
        handle.close()
        runtime.close()
