"""nerve-provisioner: workspaces worded per memory backend, and the Loom runtime.

The package has two halves that never import each other's internals:

* provisioning (``config``, ``backends``, ``template_folder``, ``render``, ``init``,
  ``placement``, ``golden``, ``texts``, ``jobs``, ``cli``), which uses Copier and Jinja2;
  init's safety in a hostile workspace lives in ``workspace_fs`` (no link followed),
  ``workspace_lock`` (one init at a time), ``workspace_state`` (manifest and journal) and
  ``bounded_yaml`` (configuration read at a bounded cost);
* ``provisioner.runtime``, which Nerve's engine imports and which never loads Copier or Jinja.

Both may use ``memory_backend`` (the server names and ``MemoryBackendUnavailable``) and
``recalled`` (making recalled text safe), which import nothing heavy.
"""

__version__ = "0.1.0"
