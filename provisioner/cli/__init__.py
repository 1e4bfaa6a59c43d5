"""The package's command line: the parser, and one module per command group.

The top of the building, reaching the rooms that do the work. Imports `backends`, `base`,
`config`, `devgateway`, `doctor`, `fleet`, `golden`, `migration`, `runtime`, `web` and
`workspace`; imported by `integrations` (to mount the command groups into Nerve's own CLI).
`main` is in `provisioner.cli.main` (the `nerve-provisioner` script, the package's only one);
`provisioner.base.command` knows the name it was invoked with (NERVE-1)."""
