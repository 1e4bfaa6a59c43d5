"""The extraction sweep: the sweeper, windows and batches, the batch budget, what a
failure means for a window, the lock, transcript sources and the SQLite state.

It imports the gateway client and the Loom backend's types; never the provisioning side.
"""
