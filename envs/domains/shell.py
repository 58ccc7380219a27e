"""Shell: ``run_command(command, timeout=None)``, a real shell in an isolated world and a canned one in the stub.

Real: recorded content is executed, so only in an isolated world (``env.isolated``: the sandbox or docker
runtime); anywhere else the call is refused with 501 and nothing runs — recorded content never runs on the
host. The command runs as ``bash -c COMMAND`` (``sh -c`` where there is no bash) under the declared
principal's uid and gid (a full ``setresuid``, no supplementary groups; the world's uid 0 runs as an
unprivileged stand-in, :mod:`..principal_ids`, so a command never holds the server's uid) — or, in a sandbox whose principals
share one uid (``env.shared_uid``), as that uid and in a pid namespace of its own, so it cannot signal the
server — without any capability (an empty bounding set, locked securebits, no-new-privs), in a new session, with stdin ``/dev/null``, a clean environment (``HOME``,
``PATH``, ``LANG``), rlimits (processes, address space, file size, CPU, no core) and a wall-clock timeout
(``timeout``, default and ceiling from the world spec). The process limit (``processes``) is RLIMIT_NPROC
where that count is the world's own (a sandbox has its own user namespace); where uids are shared with
other worlds (``env.pids_cgroup``: docker, whose containers all count in the host's namespace) the world's
own pids cgroup bounds it, and the tracer kills a command's new process at birth past ``processes``, so
no other world can exhaust the limit.

One picture of the world: the command runs in a root of its own (a mount namespace per command, see
:mod:`._command_root`) where the world's tree stands at the absolute paths the files domain resolves, so
a recorded ``rm -rf /workspace/x`` or ``cp /home/bob/app.conf .`` acts on the world's files, and its
effects are the world's. The system's directories (``/usr``, ``/bin``, ``/lib*``, ``/etc``) are there
read-only, with ``/proc``, ``/dev`` and a ``/tmp`` (the world's, if it has one, else a private one);
nothing of the server is. A world entry named like a system directory never replaces it: the world's
``/etc/app.conf`` is shown (and writable, as its modes say) inside a read-only ``/etc``, while a world's
``/etc/passwd`` or ``/usr`` symlink is not shown, and the call says so in its evidence. The working
directory is the world's workspace (made if missing, owned like the files domain's directories: by the
first declared principal); ``HOME`` is ``/home/<principal>`` where the world has it, else the workspace.

Outcome: a command that ran to its end is ``ok`` whatever its exit status, with ``{"exit_code", "stdout",
"stderr", "truncated"}`` (each stream keeps its first 64 KiB); a non-zero status is evidence, not a
refusal, because the command did run and may have changed things. A command still running at its timeout
is killed and answered with 504; one whose output passes 8 MiB is killed and answered with 413. Either
way its effects (the world's files before and after) are recorded, so a killed command that changed files
still counts as committed. After every command, whatever it left running under the principal's uid is
killed and reaped (see :mod:`._command`).

Swallowed errors are seen from outside the command. Its parent is a tracer (see :mod:`._trace`): the
env server's uid, which the principal can neither signal, write to nor trace, following every process
of the command with ptrace. When the command's status is 0, each of its processes that failed — a
program that exited non-zero or was killed, or a subshell that did — is recorded as evidence
``swallowed error: `argv` exited N`` (``cmd 2>/dev/null; echo ok``, ``cp a b || true``, a failing stage
of a pipeline without ``pipefail``), the command's own text escaped. Status 1 of a predicate (``test``,
``[``, ``grep``, ``diff``, ...) is an answer, not an error, and SIGPIPE is how pipelines end; neither is
reported. A subshell that only passes on its child's failure is not counted twice.

The command also runs after a one-line bash prelude whose DEBUG trap reports, on fd 62, the status of
each simple command the script went on from — including builtins (``false || true``, a failed ``cd``)
that no tracer sees. The command owns that shell, so it can silence or write that channel: those lines
are kept as ``the command's shell reports (unverified): ...`` and never count as a swallowed error; if
the command closed, replaced or copied fd 62 the evidence says so. Where ptrace is refused the command
runs untraced and the evidence says that too.

Stub: a harness's canned shell. It returns the recorded output (a dict as it is, a string as stdout with
exit status 0), a recorded error as 500, and an empty success when nothing was recorded.

The shell has no state of its own; its snapshot is the world's filesystem (the same resource ids and
digests as the files domain), so a command's effects on files are its effects.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import posixpath
import shutil
import signal
import stat
from contextlib import contextmanager
from dataclasses import dataclass
from collections.abc import Mapping
from typing import Any, Collection, Iterator

from ..domain import Call, Declaration, Domain, WorldEnv, register_domain, spec_section, tool
from ..errors import ServiceError, WorldSpecError
from ..rootfs import ensure_within, host_path, trace_in_root
from ..spec_bounds import bounded_number
from ..thread_ids import become, become_root
from . import _command, _command_root
from .files import DIR_MODE, TreeScanner, file_view

DEFAULT_TIMEOUT = 10.0
DEFAULT_MAX_TIMEOUT = 20.0  # below the runtimes' default 30 s backstop, so a long command is a 504, not a lost world
DEFAULT_WORKSPACE = "/workspace"
SPEC_KEYS = ("timeout", "max_timeout", "workspace", "processes", "memory", "file_size")
PATH = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
REFUSAL = ("run_command executes recorded content and needs an isolated runtime: "
           "use --runtime sandbox or --runtime docker")
SWALLOWED = "swallowed error: "
SHELL_SAYS = "the command's shell reports (unverified): "
MAX_EVIDENCE_LINES = 20
MAX_TEXT = 200  # characters of a command's own text in one line of evidence
# A predicate's status 1 is an answer, not an error (as the prelude's __lr_q says for the shell's view).
PREDICATES = frozenset({"test", "[", "[[", "grep", "egrep", "fgrep", "zgrep", "cmp", "diff", "pgrep", "which", "expr"})
EMPTY = {"exit_code": 0, "stdout": "", "stderr": "", "truncated": False}

# Reports, on fd 62, each failure the script went on from (see the module docstring). One line, ending in
# "; ", so the command's own line numbers are unchanged.
PRELUDE = (
    "__lr_i=0; __lr_pend=; __lr_done=; "
    "__lr_q() { case \"$1\" in test|test\\ *|\\[|\\[\\ *|\\[\\[*|\\(\\(*|let\\ *|grep\\ *|egrep\\ *|fgrep\\ *|zgrep\\ *"
    "|cmp\\ *|diff\\ *|pgrep\\ *|which\\ *|command\\ -v*|type\\ *) return 0;; esac; return 1; }; "
    "__lr_say() { { printf '%s\\n' \"$1\" >&62; } 2>/dev/null; }; "
    "__lr_check() { local n=$(($# - 1)) all=(\"$@\") i s c; "
    "if [[ -n $__lr_pend ]]; then __lr_say \"$__lr_pend\"; __lr_pend=; fi; "
    "local k=; { read -r k < /proc/$BASHPID/task/$BASHPID/children; } 2>/dev/null; [[ -n $k ]] && return; "
    "if ((n <= 1)); then s=${all[$n]}; [[ $s == 0 ]] && return; c=${__lr_h[(__lr_i - 1) & 7]}; "
    "[[ $s == 1 ]] && __lr_q \"$c\" && return; __lr_pend=\"\\`$c\\` exited $s\"; return; fi; "
    "for ((i = 0; i < n; i++)); do s=${all[$i]}; [[ $s == 0 ]] && continue; c=; "
    "((n <= 8)) && c=${__lr_h[(__lr_i - n + i) & 7]}; [[ $s == 1 ]] && __lr_q \"$c\" && continue; "
    "[[ $s == 141 ]] && ((i + 1 < n)) && continue; "
    "__lr_pend+=\"${__lr_pend:+$'\\n'}pipeline stage $((i + 1)) of $n \\`$c\\` exited $s\"; done; }; "
    "set -T; "
    "trap '__lr_e=$? __lr_done=1; trap - DEBUG; [[ $__lr_e == 0 && -n $__lr_pend ]] && __lr_say \"$__lr_pend\"' EXIT; "
    "trap '__lr_t=\"${PIPESTATUS[*]} $?\"; [[ -n $__lr_done || $__lr_t$__lr_pend == \"0 0\" ]] || __lr_check $__lr_t; "
    "__lr_h[__lr_i++ & 7]=$BASH_COMMAND' DEBUG; "
)


@dataclass(frozen=True)
class ShellSpec:
    """The parsed ``shell:`` section."""

    timeout: float
    max_timeout: float
    workspace: str
    limits: _command.Limits


def parse_shell_spec(spec: Mapping[str, Any]) -> ShellSpec:
    """Check a ``shell:`` section; raises :class:`WorldSpecError` naming the field."""
    for key in spec:
        if key not in SPEC_KEYS:
            raise WorldSpecError(f"world.shell.{key}", f"unknown key; expected one of {', '.join(SPEC_KEYS)}")
    timeout = bounded_number(spec, "shell.timeout", DEFAULT_TIMEOUT)
    max_timeout = bounded_number(spec, "shell.max_timeout", max(DEFAULT_MAX_TIMEOUT, timeout))
    if timeout > max_timeout:
        raise WorldSpecError("world.shell.timeout", f"must not exceed max_timeout ({max_timeout:g})")
    workspace = spec_section(spec, "workspace", "world.shell", str, DEFAULT_WORKSPACE)
    if not workspace.startswith("/") or "\0" in workspace or ".." in workspace.split("/"):
        raise WorldSpecError("world.shell.workspace", "expected an absolute path without '..'")
    defaults = _command.Limits()
    limits = _command.Limits(
        processes=bounded_number(spec, "shell.processes", defaults.processes),
        memory=bounded_number(spec, "shell.memory", defaults.memory),
        file_size=bounded_number(spec, "shell.file_size", defaults.file_size),
    )
    return ShellSpec(float(timeout), float(max_timeout), posixpath.normpath(workspace), limits)


class _Shell(Domain):
    name = "shell"
    # A command may leave files in /tmp or /dev/shm, or processes: a host that ran one is not reused.
    declaration = Declaration(contained=False, max_call_seconds=DEFAULT_MAX_TIMEOUT)

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        super().__init__(spec, env)
        self.settings = parse_shell_spec(spec)

    @classmethod
    def call_seconds(cls, section: Mapping[str, Any]) -> float | None:
        """The world's ceiling on a command's timeout (a malformed section: the default; the world refuses it)."""
        try:
            return parse_shell_spec(section).max_timeout
        except WorldSpecError:
            return cls.declaration.max_call_seconds

    def _command(self, value: Any) -> str:
        if not isinstance(value, str):
            raise ServiceError(400, f"command: expected a string, got {type(value).__name__}")
        if "\0" in value:
            raise ServiceError(400, "command: contains a NUL byte")
        return value

    def _timeout(self, call: Call, value: Any) -> float:
        """The call's timeout: the spec's default, or the one asked for, capped at the spec's ceiling."""
        if value is None:
            return self.settings.timeout
        # `not value > 0` refuses NaN too, which compares false with everything
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
            raise ServiceError(400, "timeout: expected a positive number of seconds")
        if value > self.settings.max_timeout:  # infinity and 1e308 too: the world's ceiling holds
            call.note(f"timeout {_seconds(value)} s capped at the world's max_timeout {self.settings.max_timeout:g} s")
            return self.settings.max_timeout
        return float(value)


def _seconds(value: int | float) -> str:
    """A recorded number of seconds as text, even an integer too large for a float."""
    try:
        return f"{float(value):g}"
    except OverflowError:
        return "over 1e308"


@register_domain
class ShellStub(_Shell):
    """Stub semantics: replay what the harness recorded."""

    semantics = "stub"

    @tool
    def run_command(self, call: Call, command: str, timeout: float | None = None) -> dict[str, Any]:
        self._command(command)
        self._timeout(call, timeout)
        call.read(f"files:{self.settings.workspace}")  # a command may read anything in its workspace
        recorded = call.recorded or {}
        if recorded.get("status") == "error":
            raise ServiceError(500, str(recorded.get("error") or "the recorded command failed"))
        output = recorded.get("output")
        if output is None:
            return dict(EMPTY)
        if isinstance(output, Mapping):
            return dict(output)
        if not isinstance(output, str):
            output = str(output)
        return {**EMPTY, "stdout": output}

    def snapshot(self) -> dict[str, str]:
        return {}


@register_domain
class ShellReal(_Shell):
    """Real semantics: a real shell, as the principal, in an isolated world only."""

    semantics = "real"
    declaration = Declaration(contained=False, max_call_seconds=DEFAULT_MAX_TIMEOUT, command_root=True)

    def __init__(self, spec: Mapping[str, Any], env: WorldEnv):
        super().__init__(spec, env)
        self.root = os.path.realpath(env.root) if env.root is not None else None
        self._scanner = TreeScanner(env.owners, env.declared_uid)
        self._subreaper = False

    @tool
    def run_command(self, call: Call, command: str, timeout: float | None = None) -> dict[str, Any]:
        command = self._command(command)
        limit = self._timeout(call, timeout)
        if not self.env.isolated or self.root is None:
            call.note("refused: run_command runs recorded content, and this world is not isolated")
            raise ServiceError(501, REFUSAL)
        principal = call.acting or call.principal
        with _effective_root():
            if not self._subreaper:
                self._subreaper = _command.become_subreaper()
            if os.getuid() != 0:
                call.note("refused: only an env server that is root of its runtime can give a command the world as its root")
                raise ServiceError(501, REFUSAL)
            cwd = self._workspace()
            call.read(f"files:{cwd}")  # a command may read anything in its workspace
            root = _command_root.plan(self.root)
            self._note_hidden(call, root.hidden)
            declared = self.env.ids(principal)
            uid, gid = self.env.kernel_ids(declared)
            switch = not self.env.shared_uid
            shell = shutil.which("bash", path=PATH) or shutil.which("sh", path=PATH) or "/bin/sh"
            name = os.path.basename(shell)
            is_bash = name == "bash"
            argv = [name, "--noprofile", "--norc", "-c", PRELUDE + command] if is_bash else [name, "-c", command]
            env = {"HOME": self._home(principal, cwd), "PATH": PATH, "LANG": "C.UTF-8"}
            if switch and (uid, gid) != declared:
                who = f"{principal} (uid {declared[0]}, gid {declared[1]} of the world; uid {uid}, gid {gid} here)"
            elif switch:
                who = f"{principal} (uid {uid}, gid {gid})"
            else:
                who = f"{principal} on the uid every principal shares here, without capabilities"
            call.note(f"ran `{os.path.basename(shell)} -c` as {who} in {cwd}, timeout {limit:g} s")
            if not is_bash:
                call.note("no bash here: swallowed errors inside the command are not traced")
            limits = self.settings.limits
            if self.env.pids_cgroup:  # the container's pids limit is this world's own; a uid's count is not
                limits = dataclasses.replace(limits, processes=None, traced_processes=limits.processes)
            spec = _command.Command(executable=shell, argv=argv, env=env, cwd=cwd, timeout=limit,
                                    uid=uid if switch else None, gid=gid if switch else None, limits=limits,
                                    root=root, root_mountpoint=self._mountpoint(), own_pids=self.env.shared_uid)
            try:
                result = _command.run(spec)
            except _command.SpawnError as exc:
                if exc.stage == "chdir":
                    raise OSError(exc.errno, exc.strerror, cwd) from None
                if exc.stage == "root":
                    raise ServiceError(500, f"run_command could not give the command the world as its root: "
                                            f"{exc.strerror} (the runtime must let its env server make a mount "
                                            "namespace: CAP_SYS_ADMIN and CAP_SYS_CHROOT)") from None
                raise ServiceError(500, f"run_command could not start {shell} ({exc.stage}): {exc.strerror}") from None
        return self._answer(call, result, limit)

    def _answer(self, call: Call, result: _command.Result, limit: float) -> dict[str, Any]:
        for line in swallowed_evidence(result):
            call.note(line)
        if result.leftovers:
            call.note(f"killed {result.leftovers} process(es) the command left behind")
        if result.truncated:
            call.note(f"output truncated to the first {_command.KEEP // 1024} KiB of each stream")
        if result.timed_out:
            call.note(f"still running after {limit:g} s: killed")
            raise ServiceError(504, f"run_command did not finish within {limit:g} s; the command was killed")
        if result.overflowed:
            call.note(f"wrote more than {_command.HARD_CAP // (1024 * 1024)} MiB of output: killed")
            raise ServiceError(413, f"run_command output passed {_command.HARD_CAP // (1024 * 1024)} MiB; "
                                    "the command was killed")
        if result.signal is not None:
            call.note(f"terminated by signal {result.signal} ({_signal_name(result.signal)})")
        elif result.exit_code:
            call.note(f"exit status {result.exit_code}")
        return {
            "exit_code": result.exit_code,
            "stdout": result.stdout.decode("utf-8", "replace"),
            "stderr": result.stderr.decode("utf-8", "replace"),
            "truncated": result.truncated,
        }

    def _note_hidden(self, call: Call, hidden: tuple[str, ...]) -> None:
        if hidden:
            shown = ", ".join(hidden[:5]) + (f" and {len(hidden) - 5} more" if len(hidden) > 5 else "")
            call.note(f"the command does not see the world's {shown}: the system's own entries stand there")

    def _mountpoint(self) -> str:
        """Where the command's root is made (beside the world's root, outside the world's tree)."""
        assert self.root is not None
        path = os.path.join(os.path.dirname(self.root), ".command-root")
        if not os.path.isdir(path):
            os.mkdir(path, 0o700)
        return path

    def _workspace(self) -> str:
        """The workspace's world path (made if missing, as the files domain makes directories)."""
        assert self.root is not None
        owner = self._default_owner()
        parts = [p for p in self.settings.workspace.split("/") if p]
        for depth in range(1, len(parts) + 1):
            res = trace_in_root(self.root, "/" + "/".join(parts[:depth]))
            host = host_path(self.root, res.path)
            ensure_within(self.root, host)
            if not res.exists:
                os.mkdir(host, DIR_MODE)
                os.chmod(host, DIR_MODE)
                if owner is not None and os.geteuid() == 0 and self.env.switch_uid:
                    os.chown(host, *self.env.kernel_ids(owner))
            elif not stat.S_ISDIR(os.stat(host, follow_symlinks=False).st_mode):
                raise NotADirectoryError(errno.ENOTDIR, "not a directory", res.path)
        return trace_in_root(self.root, self.settings.workspace).path

    def _default_owner(self) -> tuple[int, int] | None:
        first = next(iter(self.env.principals), None)
        return self.env.ids(first) if first is not None else None

    def _home(self, principal: str, cwd: str) -> str:
        """``/home/<principal>`` where the world has that directory, else the workspace (world paths)."""
        assert self.root is not None
        home = host_path(self.root, f"/home/{principal}")
        return f"/home/{principal}" if os.path.isdir(home) and not os.path.islink(home) else cwd

    def snapshot(self) -> dict[str, str]:
        """The world's tree as the files domain digests it (same ids, same digests)."""
        return self._scanner.scan(self.root) if self.root is not None else {}

    def unobserved(self) -> str | None:
        return self._scanner.unobserved if self.root is not None else None

    def values(self, resources: Collection[str]) -> dict[str, Any]:
        """The world's files, valued as the files domain values them."""
        if self.root is None:
            return {}
        found = self._scanner.values(self.root, set(resources))
        return {key: found[key] for key in resources if key in found}

    def view(self) -> dict[str, Any]:
        """The world's files (world path -> value), as the files domain shows them."""
        return file_view(self._scanner.values(self.root)) if self.root is not None else {}


def swallowed_evidence(result: _command.Result) -> list[str]:
    """The evidence lines about failures a command went on from (see the module docstring).

    ``swallowed error:`` lines come from the tracer alone — the kernel's account of how each process
    ended, which the command cannot reach — and only for a command whose own status is 0. The shell's
    prelude reports are the command's own account (it controls its shell, so it can hide or write them):
    they are kept, marked unverified, and never become a finding. Every piece of text the command could
    choose (its argv, its shell's lines) is escaped.
    """
    lines: list[str] = []
    trace = result.trace
    if not trace.traced and trace.end is not None:
        lines.append("not traced here (ptrace refused): how the command's processes ended was not observed")
    elif trace.end is None and not (result.timed_out or result.overflowed):
        lines.append("the tracer ended before the command: how its processes ended is not known")
    if trace.refused:
        lines.append(f"killed {trace.refused} new process(es) at birth, past the world's process limit")
    if trace.channel not in (None, "intact"):
        lines.append(f"the command {trace.channel} its shell's report descriptor (fd {_command.EVIDENCE_FD}): "
                     "the shell's own account below is incomplete or forged")
    if result.exit_code == 0 and not result.timed_out and not result.overflowed:
        failures = [failure for failure in trace.failures if _counts(failure)]
        for failure in failures[:MAX_EVIDENCE_LINES]:
            lines.append(SWALLOWED + _describe(failure))
        extra = len(failures) - MAX_EVIDENCE_LINES + trace.more
        if extra > 0:
            lines.append(f"{SWALLOWED}... and {extra} more")
    said = result.evidence
    for line in said[:MAX_EVIDENCE_LINES]:
        lines.append(SHELL_SAYS + visible_text(line))
    if len(said) > MAX_EVIDENCE_LINES:
        lines.append(f"{SHELL_SAYS}... and {len(said) - MAX_EVIDENCE_LINES} more")
    return lines


def _counts(failure: Mapping[str, Any]) -> bool:
    """Whether a failed process is a swallowed error: not a predicate's answer, not a pipeline's SIGPIPE."""
    status = failure.get("status")
    if not isinstance(status, int):
        return False
    if os.WIFSIGNALED(status):
        return os.WTERMSIG(status) != signal.SIGPIPE
    argv = failure.get("argv") or [""]
    name = posixpath.basename(str(argv[0]))
    return not (failure.get("exec") and os.waitstatus_to_exitcode(status) == 1 and name in PREDICATES)


def _describe(failure: Mapping[str, Any]) -> str:
    status = failure["status"]
    if os.WIFSIGNALED(status):
        how = f"was killed by signal {os.WTERMSIG(status)} ({_signal_name(os.WTERMSIG(status))})"
    else:
        how = f"exited {os.waitstatus_to_exitcode(status)}"
    if not failure.get("exec"):
        return f"a subshell of the command {how}"
    argv = [str(arg) for arg in failure.get("argv") or []]
    return f"`{visible_text(' '.join(argv), quoted=True)}` {how}"


def visible_text(text: str, quoted: bool = False) -> str:
    """Text a command chose, safe to show: control, bidi and other invisible characters as escapes, capped;
    ``quoted`` text goes between backticks, so a backtick in it is escaped too."""
    shown = "".join(ch if ch.isprintable() and not (quoted and ch in "`\\") else _escape(ch) for ch in text)
    return shown if len(shown) <= MAX_TEXT else shown[: MAX_TEXT - 1] + "…"


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


@contextmanager
def _effective_root() -> Iterator[None]:
    """Regain the server's root for the call's own bookkeeping (forking as the principal needs it).

    A uid-switching server runs each call with the principal's effective uid; making the workspace and
    starting a process fully as the principal (setresuid) need root back for a moment.
    """
    euid, egid = os.geteuid(), os.getegid()
    if os.getuid() != 0 or euid == 0:
        yield
        return
    become_root()
    try:
        yield
    finally:
        become(euid, egid)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown"


__all__ = ["ShellReal", "ShellStub", "ShellSpec", "parse_shell_spec", "swallowed_evidence", "visible_text",
           "DEFAULT_TIMEOUT", "DEFAULT_MAX_TIMEOUT"]
