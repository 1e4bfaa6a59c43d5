"""The Loom backend: `LoomMemory` (recall, extraction, health, diagnostics), the
op contract, how Loom's answers are read, and how recalled text becomes safe lines.

It imports the gateway client and the sweep's state store (frozen recalls live there).
"""
