"""The built-in domains; importing this package registers them."""

from . import bank, files, profiles, records  # noqa: F401
