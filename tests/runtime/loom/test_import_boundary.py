"""The Loom backend stays in the light runtime: no SDK, no template engine, no provisioning."""

from __future__ import annotations

import json
import subprocess
import sys


class TestImportBoundary:
    def test_importing_the_loom_backend_loads_no_sdk_template_engine_or_config_loader(
        self,
    ) -> None:
        code = (
            "import json, sys\n"
            "import provisioner.runtime.loom.backend\n"
            "print(json.dumps(sorted(sys.modules)))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
        )
        loaded = set(json.loads(done.stdout))
        assert "httpx" in loaded
        assert not {"mcp", "copier", "jinja2", "yaml"} & {name.split(".")[0] for name in loaded}
        assert "provisioner.config.loader" not in loaded
        assert "provisioner.devgateway" not in loaded
