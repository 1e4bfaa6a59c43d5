"""Many workspaces in one run: ``nerve-provisioner fleet check|update`` (FLEET-1, FLEET-5) and
``fleet switch`` (FLEET-7…FLEET-9).

An inventory names each workspace and its configuration folder; every workspace is judged
the way ``nerve-provisioner init --check`` judges one, against the templates this version ships,
and ``update`` places the files with init's safety (the workspace's lock, atomic writes, the
journal, nothing outside the workspace). Renders are shared between workspaces with the same
answers. A switch also migrates memU's memories and sweeps Nerve's conversations into Loom.
Imports `backends`, `base`, `config`, `migration`, `runtime` and `workspace`; imported by `cli`.
"""
