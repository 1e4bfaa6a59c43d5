"""The package's command line: the parser, and one module per command group.

The top of the building: it may import every room below it (workspace, golden, doctor,
config, templating, the runtime, the dev gateway, web). Only the Nerve integration imports
it, to mount the command groups into Nerve's own CLI. `main` is in `provisioner.cli.main`
(the `nerve-provisioner` script, the package's only one); `provisioner.base.command` knows the
name it was invoked with (NERVE-1).
"""
