"""bank domain (in progress)."""
