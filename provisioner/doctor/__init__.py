"""`nerve doctor`: the `Check` type (`check`), one module per area of checks, and the
runner (`run`) that gathers them. The area modules import `check`, never the runner.

Imports `backends`, `cli`, `config`, `counts`, `errors`, `runtime` (to reach Loom as Nerve
does), `templating` and `workspace`; imported by `cli` and `integrations`.
"""
