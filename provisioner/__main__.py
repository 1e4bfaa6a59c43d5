"""``python -m provisioner`` is the same command line as ``nerve-provisioner`` (NERVE-1)."""

from provisioner.cli.main import main

raise SystemExit(main())
