"""The `nerve` command line: the parser, and one module per command group.

The top of the building: it may import every room below it (workspace, golden, doctor,
config, templating, the runtime, the dev gateway). Nothing else imports it. `main` is in
`provisioner.cli.main`; the console script points there.
"""
