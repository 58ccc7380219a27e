"""files domain (in progress)."""
