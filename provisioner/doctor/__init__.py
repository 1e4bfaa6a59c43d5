"""`nerve doctor`: the `Check` type (`check`), one module per area of checks, and the
runner (`run`) that gathers them. The area modules import `check`, never the runner.

It may import config, templating, workspace and the runtime (to reach Loom as Nerve does).
"""
