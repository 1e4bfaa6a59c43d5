"""Nerve's ``nerve`` command with the package mounted, as Nerve's two lines would mount it.

Run as a script by the integration suite: ``python host_cli.py ARGS…`` behaves as Nerve's
installed ``nerve ARGS…`` after ``extend_cli(main)``.
"""

from __future__ import annotations

import sys

from nerve.cli import main

from provisioner.integrations.nerve import extend_cli

extend_cli(main)
sys.exit(main(prog_name="nerve"))
