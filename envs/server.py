"""The env server: one process hosting one world, answering the protocol on stdio or a unix socket.

It imports only the standard library (and pyfakefs for stub file semantics; msgspec, where importable,
reads its messages faster), so any image with Python 3.9+ can run it from a read-only mount of this package:

    python3 -m litmus_replay.envs.server --stdio [--isolated] [--switch-uid | --shared-uid] [--world-root DIR]
    python3 -m litmus_replay.envs.server --connect /run/litmus/env.sock ...
"""

from __future__ import annotations

import contextlib
import ctypes
import importlib
import os
import select
import signal
import sys
import threading
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Mapping

from .errors import EnvError, WorldSpecError
from .protocol import MAX_MESSAGE, PROTOCOL_VERSION, decode, decoder, encode, state_digest
from .rootfs import remove_tree

if TYPE_CHECKING:
    from .world import World

PR_CAPBSET_DROP = 24


@lru_cache(maxsize=1)
def envs_version() -> str:
    """This package's distribution version, or ``unknown``. An isolated runtime starts the server without
    site (``-S``) from a bare mount of the package, where no distribution metadata is on the path: it is
    not looked for there (importing ``importlib.metadata`` alone costs a sandbox about 20 ms of CPU)."""
    if sys.flags.no_site:
        return "unknown"
    try:
        from importlib.metadata import version

        return version("litmus-replay")
    except Exception:  # a checkout without metadata
        return "unknown"


class WorldHost:
    """Holds the current world and answers protocol operations; transport-agnostic."""

    def __init__(self, world_root: Path | None, isolated: bool, switch_uid: bool, shared_uid: bool = False,
                 pids_cgroup: bool = False):
        self.world_root = world_root
        self.isolated = isolated
        self.switch_uid = switch_uid
        self.shared_uid = shared_uid
        self.pids_cgroup = pids_cgroup
        self.world: World | None = None
        self.loaded: tuple[Mapping[str, Any], str] | None = None
        self.running = True

    def handle(self, message: Mapping[str, Any]) -> dict[str, Any]:
        op = message.get("op")
        reply: dict[str, Any] = {"id": message.get("id")}
        try:
            handler = getattr(self, f"op_{op}", None) if isinstance(op, str) else None
            if handler is None:
                raise ValueError(f"unknown op {op!r}")
            reply.update(ok=True, result=handler(message))
        except WorldSpecError as exc:
            reply.update(ok=False, error={"type": "WorldSpecError", "field": exc.field, "message": exc.message})
        except (EnvError, ValueError, KeyError, TypeError) as exc:
            reply.update(ok=False, error={"type": type(exc).__name__, "message": str(exc)})
        except Exception as exc:  # a domain bug: report it with its traceback, keep serving
            import traceback

            reply.update(ok=False, error={"type": "InternalError", "message": f"{type(exc).__name__}: {exc}",
                                          "traceback": traceback.format_exc(limit=8)})
        return reply

    def op_hello(self, message: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "protocol": PROTOCOL_VERSION,
            "envs_version": envs_version(),
            "python": "{}.{}.{}".format(*sys.version_info[:3]),
            "isolated": self.isolated,
            "shared_uid": self.shared_uid,
            "uid": os.getuid(),
            "pid": os.getpid(),
            "decoder": decoder(),
        }

    def _fresh_root(self) -> Path:
        """The directory the next world lays its files out in (the last world's is gone: see ``_build``)."""
        root = self.world_root / "root"  # type: ignore[operator]
        root.mkdir(parents=True)
        return root

    def _drop_root(self) -> None:
        root = self.world_root / "root"  # type: ignore[operator]
        if root.exists():
            remove_tree(root)

    def _build(self, spec: Mapping[str, Any], semantics: str) -> None:
        self._close_world()
        # Imported at the first world, not at start: a server that only says hello (the runtime's check
        # that sandboxes can start here) never pays for the domains.
        from .world import World

        if self.world_root is None:
            make_root = None
        else:
            self._drop_root()  # a world that keeps no files never sees the last one's
            make_root = self._fresh_root
        self.world = World(spec, semantics, isolated=self.isolated, switch_uid=self.switch_uid,  # type: ignore[arg-type]
                           shared_uid=self.shared_uid, pids_cgroup=self.pids_cgroup, make_root=make_root)
        self.loaded = (spec, semantics)

    def op_load(self, message: Mapping[str, Any]) -> dict[str, Any]:
        semantics = message.get("semantics")
        if semantics not in ("stub", "real"):
            raise ValueError(f"semantics must be 'stub' or 'real', not {semantics!r}")
        for module in message.get("imports") or ():  # plug-in domains: importing a module registers them
            try:
                importlib.import_module(str(module))
            except Exception as exc:
                raise EnvError(f"cannot import domain module {module!r} in the env server: "
                               f"{type(exc).__name__}: {exc}") from None
        self._build(message.get("spec") or {}, semantics)
        assert self.world is not None
        return {"tools": self.world.tools}

    def _current(self) -> World:
        if self.world is None:
            raise ValueError("no world is loaded")
        return self.world

    def op_call(self, message: Mapping[str, Any]) -> dict[str, Any]:
        return self._current().call(message["request"])

    def op_snapshot(self, message: Mapping[str, Any]) -> dict[str, Any]:
        state = self._current().snapshot()
        return {"state": state, "digest": state_digest(state)}

    def op_report(self, message: Mapping[str, Any]) -> dict[str, Any]:
        return {"reports": self._current().report()}

    def op_reset(self, message: Mapping[str, Any]) -> dict[str, Any]:
        if self.loaded is None:
            raise ValueError("no world is loaded")
        self._build(*self.loaded)
        return {}

    def _close_world(self) -> None:
        if self.world is not None:
            self.world.close()
            self.world = None

    def op_close(self, message: Mapping[str, Any]) -> dict[str, Any]:
        self._close_world()
        self.loaded = None
        return {}

    def op_shutdown(self, message: Mapping[str, Any]) -> dict[str, Any]:
        self._close_world()
        self.running = False
        return {}


def serve_stream(host: WorldHost, reader: BinaryIO, writer: BinaryIO) -> None:
    """Answer one message per line until shutdown or end of input."""
    while host.running:
        line = reader.readline(MAX_MESSAGE + 1)
        if not line:
            break
        if len(line) > MAX_MESSAGE:
            writer.write(encode({"id": None, "ok": False, "error": {"type": "ProtocolError", "message": "message too long"}}))
            writer.flush()
            break
        try:
            message = decode(line)
        except ValueError as exc:
            reply = {"id": None, "ok": False, "error": {"type": "ProtocolError", "message": str(exc)}}
        else:
            reply = host.handle(message)
        writer.write(encode(reply))
        writer.flush()


def serve_connection(host: WorldHost, path: str, watch: bool = False) -> None:
    """Connect to the unix socket the runtime listens on and answer on it until shutdown or its end
    (with ``watch``, end at once when the runtime's side goes, see :func:`end_with_runtime`).

    The server connects rather than listens, so the directory that carries the socket can be bound in
    read-only: nothing a world runs can create a file where the host would see it."""
    import socket

    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.connect(path)
        if watch:
            end_with_runtime(connection.fileno())
        with connection.makefile("rb") as reader, connection.makefile("wb") as writer:
            serve_stream(host, reader, writer)  # type: ignore[arg-type]


def end_with_runtime(fd: int) -> None:
    """Exit as soon as the runtime's end of ``fd`` (the protocol's pipe or socket) is gone, even while a
    call holds the main thread (a command that sleeps): the runtime was killed, and nobody will read
    what this world does. As a namespace's init, this process takes every process of the namespace with
    it. A parent-death signal cannot do this: the kernel clears it whenever the server changes its
    effective ids, which it does for every call."""

    def watch() -> None:
        poller = select.poll()
        poller.register(fd, select.POLLRDHUP)  # POLLHUP (a pipe's writers gone) and POLLERR always count
        while True:
            for _, events in poller.poll():
                if events & select.POLLNVAL:  # closed here: the server is ending anyway
                    return
                if events & (select.POLLHUP | select.POLLRDHUP | select.POLLERR):
                    os._exit(0)

    threading.Thread(target=watch, name="end with runtime", daemon=True).start()


def narrow_bounding_set() -> None:
    """Keep in the capability bounding set only what this process holds (bubblewrap leaves the set full):
    nothing it runs can ever gain another capability, even through a setuid or file-capability binary.
    Needs CAP_SETPCAP; without it the set stays as it is (every command still empties its own)."""
    try:
        with open("/proc/self/status") as handle:
            held = next(int(line.split()[1], 16) for line in handle if line.startswith("CapPrm:"))
        libc = ctypes.CDLL(None, use_errno=True)
    except (OSError, StopIteration, ValueError):
        return
    for cap in range(64):
        if held >> cap & 1:
            continue
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            return  # EINVAL past the last capability; EPERM without CAP_SETPCAP


def main(argv: list[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(prog="litmus_replay.envs.server", description="Host one world.")
    transport = parser.add_mutually_exclusive_group(required=True)
    transport.add_argument("--stdio", action="store_true", help="speak the protocol on stdin/stdout")
    transport.add_argument("--connect", metavar="PATH", help="speak the protocol on a unix socket the runtime listens on")
    parser.add_argument("--world-root", type=Path, help="where real worlds lay out their files")
    parser.add_argument("--isolated", action="store_true", help="this process runs in a sandbox or container")
    parser.add_argument("--switch-uid", action="store_true", help="run each real call as the principal's uid")
    parser.add_argument("--shared-uid", action="store_true",
                        help="every principal shares this process's uid: check file permissions per principal here")
    parser.add_argument("--pids-cgroup", action="store_true",
                        help="a pids cgroup bounds this world's processes; uids here are shared with other worlds, "
                             "so RLIMIT_NPROC is not a per-world limit")
    args = parser.parse_args(argv)
    if args.switch_uid and args.shared_uid:
        parser.error("--switch-uid and --shared-uid exclude each other")
    own_root = args.world_root is None
    if own_root:
        import tempfile

        world_root = Path(tempfile.mkdtemp(prefix="litmus-env-"))
    else:
        world_root = args.world_root
    host = WorldHost(world_root, args.isolated, args.switch_uid, args.shared_uid, args.pids_cgroup)
    if os.getpid() == 1:
        # The namespace's init (the sandbox, a container): the kernel then drops every signal sent from
        # inside that has no handler, so a command sharing our uid cannot stop, interrupt or end us; the
        # runtime ends us from outside, and the namespace with us.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    else:
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # so the clean-up below runs on a polite kill too
    if args.isolated:
        narrow_bounding_set()
    if args.switch_uid:
        os.setgroups([])
    init = os.getpid() == 1  # a sandbox's or a container's: it ends with its runtime, and everything with it
    try:
        if args.stdio:
            # Tool code must never write into the protocol stream: keep the real stdout for replies only.
            protocol_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
            os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
            if init:
                end_with_runtime(sys.stdin.fileno())
            serve_stream(host, sys.stdin.buffer, protocol_out)
        else:
            serve_connection(host, args.connect, watch=init)
    finally:
        host.op_close({})
        if own_root:
            with contextlib.suppress(OSError):
                remove_tree(world_root)


if __name__ == "__main__":
    main()
