"""The Loom backend: `LoomMemory` (recall, extraction, health, diagnostics, and the keyed
write of `nerve memory migrate`), the op contract, how Loom's answers are read, and how
recalled text becomes safe lines.

It imports the gateway client and the sweep's state store (frozen recalls live there).
"""
