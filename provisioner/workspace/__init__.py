"""Workspaces: `nerve init`, the Copier render, placing files without losing an edit,
the link-safe file system, the lock, the manifest and journal, previews and diffs.

Imports `backends`, `base`, `config`, `runtime` and `templating`; imported by `cli`, `doctor`,
`fleet`, `golden` and `integrations`."""
