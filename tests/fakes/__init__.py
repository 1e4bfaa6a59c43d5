"""Stand-ins the tests configure in place of what the package talks to: ``gateway`` for the MCP
gateway. Loom's stand-in, ``FakeLoom``, lives in ``testbed.loom``, since the benchmarks run
against it too."""
