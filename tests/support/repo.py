"""Where the repository's own files are, found from this file so the tests run from any
folder: the root, the goldens, and the Loom contract fixture (CON-1)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
GOLDEN_DIR = REPO_ROOT / "golden"
CONTRACT_FIXTURE_PATH = REPO_ROOT / "tests" / "fixtures" / "loom_lifecycle_ops.json"
CONTRACT_FIXTURE: dict[str, Any] = json.loads(CONTRACT_FIXTURE_PATH.read_text(encoding="utf-8"))
