"""Templating: the template folder, the one Jinja environment, the questions, the runtime
texts and job prompts, and the wording lint.

Everything a wording depends on is read or rendered here. Imports `backends`, `base` and
`runtime` (the runtime for its recalled-line rules and the session-context block); imported by
`devgateway`, `doctor`, `golden`, `integrations` and `workspace`."""
