"""``python -m provisioner`` is the same command line as ``nerve``."""

from provisioner.cli.main import main

raise SystemExit(main())
