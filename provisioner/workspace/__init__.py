"""Workspaces: `nerve init`, the Copier render, placing files without losing an edit,
the link-safe file system, the lock, the manifest and journal, previews and diffs.

It imports the templating and config rooms; golden, doctor and cli import it.
"""
