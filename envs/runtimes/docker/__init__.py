"""The ``docker`` runtime (:mod:`.runtime`), the one class that speaks to the Docker engine (:mod:`.engine`),
and the env image (:mod:`.image`). The helpers never import the runtime."""

from .engine import HOST, LABEL, OWNER, OWNER_START, SESSION, SOCKDIR, Engine, no_engine_message, reap
from .runtime import CAPABILITIES, SERVER_COMMAND, DockerRuntime, clean_up_at_exit

__all__ = ["CAPABILITIES", "clean_up_at_exit", "HOST", "LABEL", "OWNER", "OWNER_START", "SERVER_COMMAND", "SESSION", "SOCKDIR",
           "DockerRuntime", "Engine", "no_engine_message", "reap"]
