"""Configuration: the three YAML layers, `${VAR}` expansion, the key checks, URL rules.

Also the small files init writes (`config.local.yaml`), where the runtime's databases live,
and the folders found as Nerve finds them (NERVE-7). It imports the backend registry below it
(`provisioner.backends`: each backend's settings section is declared there), the shared
basics and the runtime's Loom settings rules and file faults; never the templating room.
"""
