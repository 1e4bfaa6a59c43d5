"""nerve-provisioner: workspaces worded per memory backend, and the Loom runtime.

The package has two halves that never import each other's internals:

* provisioning (``config``, ``backends``, ``render``, ``init``, ``golden``, ``texts``,
  ``jobs``, ``cli``), which uses Copier and Jinja2;
* ``provisioner.runtime``, which Nerve's engine imports and which never loads Copier or Jinja.

Both may use ``memory_backend`` (the server names and ``MemoryBackendUnavailable``) and
``recalled`` (making recalled text safe), which import nothing heavy.
"""

__version__ = "0.1.0"
