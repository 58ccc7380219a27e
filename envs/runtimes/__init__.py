"""The isolated runtimes (``sandbox``, ``docker``) and what they share: how a world's domains are hosted
(:mod:`.hosting`) and how hosts are pooled for reuse (:mod:`.pool`). They are registered by :mod:`..registry`."""
