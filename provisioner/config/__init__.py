"""Configuration: the three YAML layers, `${VAR}` expansion, the key checks, URL rules.

Also the small files init writes (`config.local.yaml`), where the runtime's databases live, and
the folders found as Nerve finds them (NERVE-7). Imports `backends`, `base` and `runtime`;
imported by `cli`, `doctor`, `fleet`, `integrations`, `web` and `workspace`. Each backend's
settings section is declared in the backend registry, and the runtime gives its Loom settings
rules and file faults; the templating room is never imported."""
