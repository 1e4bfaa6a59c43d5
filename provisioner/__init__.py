"""nerve-provisioner: workspaces worded per memory backend, and the Loom runtime.

The package has two halves that never import each other's internals:

* provisioning, which uses Copier and Jinja2: ``backends`` (the registry of what differs per
  memory backend, below the rooms that read it), ``config`` (the layered settings, read at a
  bounded cost), ``templating`` (the template folder, the runtime texts and job prompts, the
  wording lint), ``workspace`` (``nerve init``, the render, placing files
  without losing an edit; its safety in a hostile workspace lives in ``workspace.fs``, no link
  followed, ``workspace.lock``, one init at a time, and ``workspace.state``, the manifest and
  journal), ``golden``, ``doctor``, ``migration``, ``web``, ``devgateway``, ``cli`` and
  ``integrations``;
* ``provisioner.runtime``, which Nerve's engine imports and which never loads Copier or Jinja.

Both may use ``runtime.memory_contract`` (the server names), ``runtime.errors`` (the runtime's
errors, ``MemoryBackendUnavailable`` among them) and ``runtime.loom.recalled`` (making recalled
text safe), which import nothing heavy.
docs/architecture.md maps every room and module.
"""

__version__ = "0.1.0"
