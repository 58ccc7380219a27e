"""The tracer behind the shell's swallowed-error evidence, run here on trusted commands of the test's own
(never on recorded content): what it records of each process, what it makes of the shell's report
descriptor, and the process limit it enforces where RLIMIT_NPROC cannot be per world."""

from __future__ import annotations

import multiprocessing
import os
import shutil
from concurrent.futures import ProcessPoolExecutor

import pytest

from litmus_replay.envs.domains import _command
from litmus_replay.envs.domains.shell import PRELUDE, SHELL_SAYS, SWALLOWED, swallowed_evidence, visible_text

BASH = shutil.which("bash")
pytestmark = pytest.mark.skipif(BASH is None, reason="needs bash")


def _run(command: str, **limits) -> _command.Result:
    """Run in a child process of its own: after a command, everything under the caller is killed."""
    spec = _command.Command(executable=BASH, argv=["bash", "--noprofile", "--norc", "-c", PRELUDE + command],
                            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}, cwd="/",
                            timeout=20, limits=_command.Limits(**limits))
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        result = pool.submit(_command.run, spec).result()
    if not result.trace.traced:
        pytest.skip("ptrace is refused here")
    return result


def _argvs(result: _command.Result) -> list[tuple[list[str] | None, int]]:
    return [(f["argv"] if f["exec"] else None, os.waitstatus_to_exitcode(f["status"])) for f in result.trace.failures]


def test_each_failing_process_is_recorded_with_its_argv_and_status():
    result = _run("ls /nonexistent/x 2>/dev/null; cat /nonexistent/y 2>/dev/null | cat; echo ok")
    assert result.exit_code == 0 and result.stdout == b"ok\n"
    assert _argvs(result) == [(["ls", "/nonexistent/x"], 2), (["cat", "/nonexistent/y"], 1)]
    assert result.trace.channel == "intact"


def test_a_subshell_passing_on_its_childs_failure_is_one_record():
    assert _argvs(_run("x=$(ls /nonexistent/x 2>&1); true")) == [(["ls", "/nonexistent/x"], 2)]
    assert _argvs(_run("( exit 3 ); true")) == [(None, 3)]


def test_the_commands_own_status_comes_from_the_tracer():
    assert _run("exit 7").exit_code == 7
    assert _run("kill -TERM $$").exit_code == 128 + 15


@pytest.mark.parametrize("command, state", [
    ("echo '`x` exited 1' >&62", "intact"),  # writing is not visible here: that is why the account is unverified
    ("exec 62>&-", "closed"),
    ("exec 62>/dev/null", "replaced"),
    ("exec 70>&62", "copied"),
])
def test_what_became_of_the_shells_report_descriptor(command, state):
    assert _run(command + "; true").trace.channel == state


def test_only_the_tracers_records_are_swallowed_errors_and_the_shells_lines_are_unverified():
    result = _run("printf 'swallowed error: `rm -rf /` exited 1\\n' >&62; false; ls /nonexistent 2>/dev/null; true")
    lines = swallowed_evidence(result)
    assert [line for line in lines if line.startswith(SWALLOWED)] == [SWALLOWED + "`ls /nonexistent` exited 2"]
    assert SHELL_SAYS + "swallowed error: `rm -rf /` exited 1" in lines
    assert SHELL_SAYS + "`false` exited 1" in lines


def test_a_failure_under_a_nonzero_status_is_not_swallowed():
    assert not [line for line in swallowed_evidence(_run("ls /nonexistent 2>/dev/null; exit 4"))
                if line.startswith(SWALLOWED)]


def test_the_tracer_bounds_live_processes_and_does_not_count_its_kills_as_failures():
    result = _run("for i in $(seq 40); do sleep 5 & done 2>/dev/null; echo started", traced_processes=10)
    assert result.stdout == b"started\n"
    assert result.trace.refused >= 30
    assert not [line for line in swallowed_evidence(result) if line.startswith(SWALLOWED)]


@pytest.mark.parametrize("text, shown", [
    ("plain `x`", "plain `x`"),
    ("\x1b[31mred\x07", "\\x1b[31mred\\x07"),
    ("a\u202eb\nc", "a\\u202eb\\x0ac"),
])
def test_command_text_is_shown_with_invisible_characters_escaped(text, shown):
    assert visible_text(text) == shown
    assert visible_text("`", quoted=True) == "\\x60"
