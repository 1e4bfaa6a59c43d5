"""A real configuration for the Loom backend's tests, written as an operator would write it."""

from __future__ import annotations

from pathlib import Path

from provisioner.config.loader import Config, load_config


def loom_config(
    tmp_path: Path,
    gateway_url: str | None,
    *,
    org: str | None = None,
    namespace: str | None = None,
) -> Config:
    """A real configuration (config.local.yaml in a fresh folder) for the Loom backend."""
    config_dir = tmp_path / "config"
    config_dir.mkdir(exist_ok=True)
    lines = ["memory:", "  backend: loom"]
    loom = {"org": org, "namespace": namespace}
    if any(loom.values()):
        lines.append("  loom:")
        lines += [f"    {key}: {value}" for key, value in loom.items() if value]
    lines.append(f"mcp_gateway_url: {gateway_url or ''}")
    (config_dir / "config.local.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return load_config(config_dir, None, env={})
