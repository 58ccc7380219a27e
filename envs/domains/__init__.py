"""The built-in domains; importing this package registers them. Each declares what runtimes need to know
about it (:class:`~litmus_replay.envs.domain.Declaration`)."""

from . import bank, files, profiles, records, shell  # noqa: F401
