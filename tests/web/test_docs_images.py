"""The pictures in the docs are current: the architecture diagrams and the Memory page shots."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]


class TestArchitectureDiagrams:
    def test_the_svgs_and_the_mermaid_blocks_match_their_declaration(self) -> None:
        """DOC-2: docs/architecture.md's pictures are drawn from scripts/architecture_diagram.py."""
        done = subprocess.run(
            [sys.executable, str(REPO_ROOT / "scripts" / "architecture_diagram.py"), "--check"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr

    def test_the_page_shows_both_pictures(self) -> None:
        page = (REPO_ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
        for name in ("modules", "flows"):
            assert f"](images/architecture-{name}.svg)" in page
            assert (REPO_ROOT / "docs" / "images" / f"architecture-{name}.svg").is_file()
