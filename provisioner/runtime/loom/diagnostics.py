"""What ``LoomMemory.diagnostics()`` shows, assembled from the backend's parts (LOOM-4).

The backend hands over what it holds — its gateway URL, catalog reader, connection, the
identity of its last health probe, the overrides it was built with, the sweep's batch budget
and the last errors — and gets back the plain dictionary ``nerve memory status``, ``nerve
doctor`` and the Memory page show. Never any message text. Nothing here makes a call: a
diagnostics read costs no network, whatever the gateway's state.

``since_last_error`` reads what the state file says about the last error kept there, for a
process other than the sweep's (``nerve memory status``): how many batches went through since,
and the fault code of the batch it was. A state file that cannot be read, or holds values
that make no sense, gives nothing rather than an error.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from provisioner.runtime.gateway.catalog import GatewayCatalog
from provisioner.runtime.gateway.client import LoomConnection
from provisioner.runtime.loom.report import CODE_MAX_CHARS, LastError
from provisioner.runtime.loom.types import Identity
from provisioner.runtime.memory_contract import LOOM_SERVER
from provisioner.runtime.state import StateStore

# outcomes.error_kind's "Kind(CODE)", as the sweep's failed row keeps it
FAILED_DETAIL = re.compile(rf"(?P<kind>\w+)\((?P<code>.{{1,{CODE_MAX_CHARS}}})\)")


def agent_tools_of(catalog: GatewayCatalog | None) -> frozenset[str]:
    """The Loom tools the last good catalog lists for the agent; empty without ``loom``."""
    latest = catalog.latest if catalog else None
    server = latest.server(LOOM_SERVER) if latest else None
    return frozenset(server.tools) if server else frozenset()


def diagnostics_report(
    *,
    backend: str,
    available: bool,
    gateway_url: str | None,
    catalog: GatewayCatalog | None,
    connection: LoomConnection | None,
    identity: Identity | None,
    overrides: tuple[str | None, str | None],
    batch_budget: Mapping[str, Any] | None,
    last_error: LastError | None,
    wall_clock: Callable[[], float],
) -> dict[str, Any]:
    """The diagnostics dictionary (LOOM-4); ``overrides`` are the configured org, namespace."""
    latest = catalog.latest if catalog else None
    catalog_error = catalog.last_error if catalog else None
    return {
        "backend": backend,
        "available": available,
        "gateway_url": gateway_url,
        "catalog": {
            "generation": latest.generation if latest else None,
            "lists_loom": bool(latest and latest.lists(LOOM_SERVER)),
            "loom_tools": sorted(agent_tools_of(catalog)),
            "read_error": catalog_error.reason if catalog_error else None,
        },
        "identity": _identity_report(identity, *overrides),
        "breaker": _breaker_report(connection, wall_clock),
        "batch_budget": dict(batch_budget) if batch_budget is not None else None,
        "last_error": last_error.as_dict() if last_error else None,
    }


def newest_error(mine: LastError | None, state: StateStore | None) -> LastError | None:
    """The error recorded last: this process's, or one the state store kept after it.

    By arrival, never by time (REL-7): the store keeps errors in the order they came, this
    process's own among them, so its newest is the answer once this process's error is in it.
    An error of this process the store does not hold (it could not be written) is the newest
    this process knows of. A store that cannot be read shows this process's error alone.
    """
    kept = None
    if state is not None:
        try:  # this process's row first: the store may take it (off the loop) between reads,
            own = state.last_error((mine.op,)) if mine is not None else None
            row = state.last_error()  # and then the newest is at least as new as it
        except (sqlite3.Error, ValueError, TypeError):
            row = own = None
        kept = LastError(*row) if row is not None else None
        if mine is not None and own is not None and LastError(*own) == mine and kept:
            return kept
    return mine if mine is not None else kept


def since_last_error(state: StateStore) -> dict[str, Any] | None:
    """The last error kept in ``state``, with what followed it (LOOM-4, SWEEP-13).

    ``at`` (seconds since the epoch), ``op``, ``kind``; ``batches_through_since``: the batches
    Loom took (waiting) or queued after it; ``code``: a coded fault's code, as kept with the
    error, or for an error kept before that (state schema step 8) from the sweep's ``failed``
    row of that batch (which names the kind and code, never a message); a code that is not
    short printable text is None. None when no error is kept or the file cannot be read as
    expected.
    """
    try:
        kept = state.newest_error()
        if kept is None:
            return None
        at, op, kind, kept_code = kept.at, kept.op, kept.kind, kept.code
        through, failed = state.batches_since(at, after_seq=kept.audit_seq)  # REL-7
    except (sqlite3.Error, ValueError, TypeError):
        return None
    code = kept_code
    if code is None and op == "extract" and failed is not None:  # kept before step 8
        match = FAILED_DETAIL.fullmatch(str(failed))
        code = match["code"] if match and match["kind"] == kind else None
    if not (isinstance(code, str) and 0 < len(code) <= CODE_MAX_CHARS and code.isprintable()):
        code = None
    return {"at": at, "op": op, "kind": kind, "batches_through_since": through, "code": code}


def _identity_report(
    identity: Identity | None, org: str | None, namespace: str | None
) -> dict[str, Any]:
    return {
        "org": identity.org if identity else org,
        "org_source": identity.org_source if identity else _source(org),
        "namespace": identity.namespace if identity else namespace,
        "namespace_source": identity.namespace_source if identity else _source(namespace),
        "shared_namespaces": list(identity.shared_namespaces) if identity else None,
        "memory_count": identity.memory_count if identity else None,
    }


def _breaker_report(
    connection: LoomConnection | None, wall_clock: Callable[[], float]
) -> dict[str, Any] | None:
    if connection is None:
        return None
    snapshot = connection.breaker.snapshot()
    closes_at = None
    if snapshot["state"] == "open":
        when = wall_clock() + snapshot["retry_in_s"]
        closes_at = datetime.fromtimestamp(when, UTC).isoformat(timespec="seconds")
    return {**snapshot, "closes_at": closes_at}


def _source(override: str | None) -> str | None:
    """Before a probe: ``config`` for an override, else unknown until Loom is asked."""
    return "config" if override else None
