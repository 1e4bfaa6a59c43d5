"""`nerve memory migrate`: memU's memories copied into Loom, one keyed write per item (MIG-1).

An operator's job above the runtime: it reads memU's SQLite store read-only
(``memu_store``, with ``memu_values`` turning each column into what Loom takes), writes each
item through ``LoomMemory.set_memory`` under the key ``memu-<item id>``, and keeps a ledger in
the runtime's state file (``ledger``), so a second run, or a run after a crash, writes nothing
twice and goes on where the last one stopped (``migrate``; what a run did is a ``report``).
Imports `base` and `runtime`; imported by `cli` and `fleet`.
"""
