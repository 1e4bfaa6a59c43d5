"""Doctor's backend checks that need no network: memU's store and key; Loom's gateway and link.

Under memU doctor says memory is kept in memU and whether the optional embeddings key is set
— never its value. Under Loom it names Loom and the gateway (ERR when ``mcp_gateway_url`` is
missing: Loom cannot be reached without it) and says whether the dashboard link can be shown:
only an absolute http(s) URL becomes a link (CONF-5); the loader drops anything else with a
warning, and doctor turns that into a WARN with the fix.
"""

from __future__ import annotations

from pathlib import Path

from provisioner.backends import get_backend
from provisioner.config.local_file import EMBEDDINGS_KEY_PATH, LOCAL_CONFIG_NAME
from provisioner.config.model import Config
from provisioner.doctor.check import ERR, OK, WARN, Check, lookup, one_line

EMBEDDINGS_KEY = ".".join(EMBEDDINGS_KEY_PATH)  # INIT-3
DASHBOARD_KEY = "memory.loom.dashboard_url"  # CONF-5


def memory_checks(config: Config, workspace: Path, config_dir: Path) -> list[Check]:
    """The checks of the configured backend."""
    if config.memory_backend == "loom":
        from provisioner.doctor.sweep import sweep_checks

        return [
            gateway_check(config, config_dir),
            dashboard_check(config),
            *sweep_checks(config_dir),
        ]
    return [memu_store_check(config), embeddings_key_check(config)]


def memu_store_check(config: Config) -> Check:
    name = get_backend(config.memory_backend).display_name
    return Check("memu.store", OK, f"memory is kept in {name}, Nerve's embedded store")


def embeddings_key_check(config: Config) -> Check:
    """Whether memU's optional embeddings key is set, and in which file; never the value."""
    value = lookup(config.data, EMBEDDINGS_KEY)
    if isinstance(value, str) and value.strip():
        source = config.source_of(EMBEDDINGS_KEY)
        return Check(
            "memu.embeddings_key",
            OK,
            f"the optional embeddings key ({EMBEDDINGS_KEY}) is set in {source}",
            source=str(source),
        )
    return Check(
        "memu.embeddings_key",
        OK,
        f"the optional embeddings key ({EMBEDDINGS_KEY}) is not set; memU works without it",
    )


def gateway_check(config: Config, config_dir: Path) -> Check:
    """Loom and its gateway; ERR when there is no gateway URL (LOOM-2: memory unavailable)."""
    if config.mcp_gateway_url:
        return Check(
            "loom.gateway",
            OK,
            f"memory is kept in Loom, reached through the MCP gateway at {config.mcp_gateway_url}",
            source=_source(config, "mcp_gateway_url"),
        )
    where = config_dir / LOCAL_CONFIG_NAME
    if config.lockdown:
        where_text = "the service's NERVE_MCP_BASE_URL (lockdown reads no machine-local file)"
    else:
        where_text = str(where)
    return Check(
        "loom.gateway",
        ERR,
        "memory.backend is loom but mcp_gateway_url is not set: Loom cannot be reached and "
        "memory is unavailable",
        advice=f"set mcp_gateway_url to the gateway's base URL in {where_text}",
    )


def dashboard_check(config: Config) -> Check:
    """The dashboard link: shown only for an absolute http(s) URL (CONF-5)."""
    if config.loom.dashboard_url:
        return Check(
            "loom.dashboard",
            OK,
            f"the Memory page links Loom's dashboard at {config.loom.dashboard_url}",
            source=_source(config, DASHBOARD_KEY),
        )
    raw = lookup(config.data, DASHBOARD_KEY)
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return Check("loom.dashboard", OK, "no dashboard link is set (optional)")
    return Check(
        "loom.dashboard",
        WARN,
        f"{DASHBOARD_KEY} {one_line(repr(raw), 120)} is not an absolute http or https URL, "
        "so no link is shown",
        advice=f"set {DASHBOARD_KEY} to a full https:// address, or remove it",
        source=_source(config, DASHBOARD_KEY),
    )


def _source(config: Config, key: str) -> str | None:
    path = config.source_of(key)
    return str(path) if path is not None else None
