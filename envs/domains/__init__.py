"""The built-in domains, one module each; a module registers its domains when imported, which the
registry does when a world first names one (see :data:`~litmus_replay.envs.domain.BUILTIN_DOMAINS`). Each
declares what runtimes need to know about it (:class:`~litmus_replay.envs.domain.Declaration`)."""
