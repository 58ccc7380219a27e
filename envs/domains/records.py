"""records domain (in progress)."""
