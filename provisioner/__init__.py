"""nerve-provisioner: workspaces worded per memory backend, and the Loom runtime.

The package has two halves that never import each other's internals:

* provisioning (``config``, ``backends``, ``render``, ``init``, ``golden``, ``doctor``,
  ``cli``), which uses Copier and Jinja2;
* ``provisioner.runtime``, which Nerve's engine imports and which never loads Copier or Jinja.
"""

__version__ = "0.1.0"
