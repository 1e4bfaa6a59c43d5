"""What plugs this package into a host application: one sub-package per host (``nerve``).

An integration may import every room of the package and the host's own libraries (click,
FastAPI), which it imports only when used. Imports `backends`, `base`, `cli`, `config`,
`doctor`, `runtime`, `templating`, `web` and `workspace`; imported by no room. Both read Nerve's
database through ``integrations.nerve.transcripts`` (``nerve memory sweep --nerve-db`` and
``fleet switch``), which imports the runtime and the standard library only."""
