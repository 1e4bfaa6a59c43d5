"""Configuration: the three YAML layers, `${VAR}` expansion, the key checks, URL rules.

Also the small files init writes (`config.local.yaml`), where the runtime's databases live,
and the folders found as Nerve finds them (NERVE-7). It may import the templating room's
backend registry (each backend's settings section is declared there), which in turn names
this room's URL rule and setup steps: the two rooms share a floor, with no circle between
their modules.
"""
