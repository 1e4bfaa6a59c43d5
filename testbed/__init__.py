"""What the tests and the benchmarks both run the package against: stand-ins and builders.

``loom`` (``FakeLoom``, Loom at the seam the sweep, the follow-up and the migration call),
``virtual_time`` (an event loop whose clock jumps to the next timer), ``nerve_db`` (a
``nerve.db`` in Nerve's schema), ``memu_db`` (a memU store in memu-py's layout),
``fleet_switch`` (instances on memU as a platform runs them) and ``sdk_peer`` (the official
``mcp`` server behind a catalog app, in this process or as a script).

Imports run one way: the tests and the benchmarks import this package, and it imports neither
of them (``tests/test_benchmarks.py`` holds both rules), so a benchmark never reaches into the
test suite and the suite can move without breaking one.
"""
