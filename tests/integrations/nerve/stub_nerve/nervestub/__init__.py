"""A stand-in for Nerve's command line (the distribution ``nerve``), used by the tests."""
