"""`nerve doctor`: the `Check` type (`check`), one module per area of checks, and the
runner (`run`) that gathers them. The area modules import `check`, never the runner.

Imports `backends`, `base`, `config`, `runtime`, `templating` and `workspace` (the runtime to
reach Loom as Nerve does); imported by `cli` and `integrations`."""
