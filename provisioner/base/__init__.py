"""What every provisioning room stands on, just above the runtime: the shared small parts.

``errors`` (``UserError`` and ``TemplateBroken``, under the package's one root, which lives in
the runtime), ``command`` (the command's name as it was invoked, for every hint, NERVE-1),
``files`` (whole files written atomically), ``counts`` (a count in the number its noun takes)
and ``loopback`` (the Host/Origin rule of the two local servers). The standard library and the
runtime's errors only. Imports `runtime`; imported by `backends`, `cli`, `config`, `devgateway`,
`doctor`, `fleet`, `golden`, `integrations`, `migration`, `templating`, `web` and `workspace`.
"""
