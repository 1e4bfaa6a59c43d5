"""Goldens: the byte-exact check and update of every render and runtime text, and how a
difference is shown. It imports the workspace, templating and config rooms.
"""
