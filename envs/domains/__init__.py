"""The built-in domains; importing this package registers them."""

from . import bank, files, profiles, records, shell  # noqa: F401
