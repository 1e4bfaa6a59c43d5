"""Goldens: the byte-exact check and update of every render and runtime text, and how a
difference is shown. Imports `backends`, `base`, `runtime`, `templating` and `workspace`;
imported by `cli`."""
