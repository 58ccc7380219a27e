"""The built-in runtimes besides in-process; importing this package registers them."""

from . import sandbox  # noqa: F401

try:
    from . import docker  # noqa: F401  (host side only; the Docker SDK itself is imported when used)
except ImportError:  # pragma: no cover
    pass
