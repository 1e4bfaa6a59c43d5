"""The ground floor: what every room stands on, the runtime included, and nothing above it.

``errors`` (the package's one root, ``ProvisionerError``, and the groups a caller catches),
``faults`` (a file the machine would not give, named the same way everywhere, with its exit
status, REL-4), ``command`` (the command's name as it was invoked, for every hint, NERVE-1),
``files`` (whole files written atomically), ``counts`` (a count in the number its noun
takes) and ``loopback`` (the Host/Origin rule of the two local servers). Standard library
only; imports no room.
"""
