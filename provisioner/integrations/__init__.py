"""What plugs this package into a host application: one sub-package per host (``nerve``).

An integration may import every room of the package and the host's own libraries (click,
FastAPI), which it imports only when used. Imports `backends`, `base`, `cli`, `config`,
`doctor`, `runtime`, `templating`, `web` and `workspace`; imported by no room. Nerve's database
is read by the runtime (``provisioner.runtime.nerve_db``), so ``nerve memory sweep --nerve-db``
and ``fleet switch`` reach it without reaching up here.
"""
