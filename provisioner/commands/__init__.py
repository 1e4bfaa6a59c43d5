"""Command groups of the ``nerve`` command line that live outside ``provisioner.cli``."""
