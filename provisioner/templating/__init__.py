"""Templating: the template folder, the one Jinja environment, the questions, the runtime
texts and job prompts, the wording lint, and the registry of backend differences.

Everything a wording depends on is read or rendered here. It imports only the shared basics
(`provisioner.errors`, `provisioner.files`), the config room's URL rule and setup steps, and
the runtime's recalled-line rules; never the workspace, golden, doctor or cli rooms.
"""
