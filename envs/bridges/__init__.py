"""Bridges: domains whose real semantics are a benchmark's own environment, each behind an optional extra.

A bridge module imports its benchmark's package only when a world of that benchmark is opened, so
registering its domains costs nothing where the benchmark is not installed.
"""
