"""The package's command line: the parser, and one module per command group.

The top of the building, reaching the rooms that do the work. Imports `backends`, `config`,
`counts`, `devgateway`, `doctor`, `errors`, `fleet`, `golden`, `integrations`, `migration`,
`runtime`, `web` and `workspace`; imported by `doctor`, `golden` and `integrations` (the
Nerve integration to mount the command groups into Nerve's own CLI, the other two for the
command's name as invoked). `main` is in `provisioner.cli.main`
(the `nerve-provisioner` script, the package's only one); `provisioner.cli.entry` knows the
name it was invoked with (NERVE-1).
"""
