"""What plugs this package into a host application: one sub-package per host (``nerve``).

An integration may import every room of the package and the host's own libraries (click,
FastAPI), which it imports only when used; nothing in the package imports an integration,
save ``nerve memory sweep --nerve-db``, which reads Nerve's database through
``integrations.nerve.transcripts`` (itself importing the runtime and the standard library only).
"""
