"""Templating: the template folder, the one Jinja environment, the questions, the runtime
texts and job prompts, and the wording lint.

Everything a wording depends on is read or rendered here. It imports only the shared basics
(`provisioner.base.errors`, `provisioner.base.files`), the backend registry below it
(`provisioner.backends`), and the runtime's recalled-line rules; never the config, workspace,
golden, doctor or cli rooms.
"""
