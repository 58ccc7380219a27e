"""A plug-in domain (``notes``) whose stub comes in a faithful and an unfaithful profile."""
