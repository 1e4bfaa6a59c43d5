"""Tests of what plugs the package into Nerve: its command line, its database, its app."""
