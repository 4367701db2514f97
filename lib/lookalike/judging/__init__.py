"""Judges (built-in, model and people), the label store, the label database and the team label server."""
