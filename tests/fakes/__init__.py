"""Stand-ins the tests configure in place of what the package talks to: ``loom.FakeLoom`` for
Loom behind the gateway, at the seam the sweep, the follow-up and the migration call."""
