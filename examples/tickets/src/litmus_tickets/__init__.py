"""An example plug-in domain for litmus-replay: a ticket tracker (see :mod:`.domain`)."""

__version__ = "0.1.0"
