"""The runtime's face to the rest of the package: every name a provisioning room uses.

Nerve's engine reaches the runtime through ``provisioner.runtime`` (the host API's runtime half);
the package's own rooms (the command line, doctor, the fleet, migration, the web page, the dev
gateway, templating, config) reach it through this module alone, so every other module under
``provisioner/runtime/`` stays internal and may move without a room above noticing
(``tests/test_layout.py`` holds every import outside the runtime to the two faces). Each name is
imported from its home when first used (PEP 562), so naming an error or a constant loads no HTTP
client: a command imports only what it runs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from provisioner.runtime.lazy import lazy_names

if TYPE_CHECKING:  # the names for type checkers; at run time each comes from _HOME
    from provisioner.runtime.budget import (  # noqa: F401
        extraction_mode,
    )
    from provisioner.runtime.clock import (  # noqa: F401
        Sleep,
    )
    from provisioner.runtime.errors import (  # noqa: F401
        CAUSE_OF_KIND,
        EXIT_CANNOT_CREATE,
        EXIT_IO,
        EXIT_LOOK_AT_FILE,
        EXIT_STATUS_OF_KIND,
        EXIT_TRY_LATER,
        EXIT_USAGE,
        FaultKind,
        FileFault,
        MemoryBackendUnavailable,
        OperatorMustAct,
        ProvisionerError,
        ProvisionerRuntimeError,
        StoreFault,
        classify_file_error,
        faults_named,
        file_fault,
    )
    from provisioner.runtime.gateway.catalog import (  # noqa: F401
        CATALOG_DEADLINE_S,
        GatewayCatalog,
    )
    from provisioner.runtime.gateway.errors import (  # noqa: F401
        BrokenAnswer,
        CatalogError,
        CircuitOpen,
        CodedFault,
        ContractBroken,
        GatewayCallTimeout,
        GatewayError,
        MayPass,
        NoAnswer,
        NotNow,
    )
    from provisioner.runtime.gateway.masking import (  # noqa: F401
        masked,
    )
    from provisioner.runtime.gateway.protocol import (  # noqa: F401
        nested_deeper_than,
    )
    from provisioner.runtime.lazy import (
        lazy_names,
    )
    from provisioner.runtime.loom.answers import (  # noqa: F401
        MEMORY_TEXT_MAX_CHARS,
        MESSAGE_ROLES,
        TAG_MAX_CHARS,
        TAGS_MAX,
    )
    from provisioner.runtime.loom.backend import (  # noqa: F401
        EXTRACT_DEADLINE_S,
        LoomMemory,
    )
    from provisioner.runtime.loom.context_block import (  # noqa: F401
        SHAPES,
        session_context,
    )
    from provisioner.runtime.loom.contract import (  # noqa: F401
        LOOM_OP_TOOL,
    )
    from provisioner.runtime.loom.diagnostics import (  # noqa: F401
        since_last_error,
    )
    from provisioner.runtime.loom.queue import (  # noqa: F401
        extraction_queue,
    )
    from provisioner.runtime.loom.report import (  # noqa: F401
        CODE_MAX_CHARS,
        SWEEP_OPS,
        failure_words,
    )
    from provisioner.runtime.loom.settings import (  # noqa: F401
        LOOM_NAME_PATTERN,
        LOOM_NAME_RULE,
        SWEEP_CONCURRENCY_DEFAULT,
        SWEEP_CONCURRENCY_MAX,
        SWEEP_CONCURRENCY_MIN,
        boolean_value,
        memory_backend,
        whole_number_value,
    )
    from provisioner.runtime.loom.types import (  # noqa: F401
        WRITE_VERDICTS,
        Extracted,
        MemoryWrite,
        WriteVerdict,
    )
    from provisioner.runtime.loom.write import (  # noqa: F401
        WRITE_DEADLINE_S,
    )
    from provisioner.runtime.memory_contract import (  # noqa: F401
        LOOM_SERVER,
        NERVE_SERVER,
    )
    from provisioner.runtime.nerve_db.transcripts import (  # noqa: F401
        NerveDatabaseError,
        NerveTranscripts,
    )
    from provisioner.runtime.sqlite_file import (  # noqa: F401
        BUSY_TIMEOUT_MS,
    )
    from provisioner.runtime.state import (  # noqa: F401
        AUDIT_MIGRATION_SKIPPED,
        AUDIT_WENT_BACK,
        LEDGER_CONFLICT,
        LEDGER_FAILING,
        LEDGER_FINAL_STATUSES,
        LEDGER_REJECTED,
        LEDGER_SKIPPED,
        LEDGER_WRITTEN,
        AuditEntry,
        AuditNote,
        LedgerEntry,
        MigrationRun,
        ReadOnlyState,
        StateBusyError,
        StateStore,
        StateVersionError,
    )
    from provisioner.runtime.sweep.backfill import (  # noqa: F401
        BackfillBusy,
        backfill_line,
        parse_backfill,
        run_backfill,
    )
    from provisioner.runtime.sweep.lock import (  # noqa: F401
        file_lock,
        lock_path_of,
    )
    from provisioner.runtime.sweep.outcomes import (  # noqa: F401
        STOPPED_BUSY,
        STOPPED_DONE,
        SWEEP_ERRORS,
        UNREACHED_STOPS,
        SweepProgress,
        SweepReport,
        error_kind,
        reaction_to,
    )
    from provisioner.runtime.sweep.plan import (  # noqa: F401
        StateUnreadable,
        plan_from_file,
    )
    from provisioner.runtime.sweep.source import (  # noqa: F401
        sweep_source,
    )
    from provisioner.runtime.sweep.sweeper import (  # noqa: F401
        Sweeper,
    )
    from provisioner.runtime.transcripts import (  # noqa: F401
        Message,
        SqliteTranscripts,
        TranscriptSource,
        TranscriptsVersionError,
        instant_of,
        parsed_time,
        shown_session_id,
    )

_HOME: dict[str, str] = {
    "extraction_mode": "provisioner.runtime.budget",
    "Sleep": "provisioner.runtime.clock",
    "CAUSE_OF_KIND": "provisioner.runtime.errors",
    "EXIT_CANNOT_CREATE": "provisioner.runtime.errors",
    "EXIT_IO": "provisioner.runtime.errors",
    "EXIT_LOOK_AT_FILE": "provisioner.runtime.errors",
    "EXIT_STATUS_OF_KIND": "provisioner.runtime.errors",
    "EXIT_TRY_LATER": "provisioner.runtime.errors",
    "EXIT_USAGE": "provisioner.runtime.errors",
    "FaultKind": "provisioner.runtime.errors",
    "FileFault": "provisioner.runtime.errors",
    "MemoryBackendUnavailable": "provisioner.runtime.errors",
    "OperatorMustAct": "provisioner.runtime.errors",
    "ProvisionerError": "provisioner.runtime.errors",
    "ProvisionerRuntimeError": "provisioner.runtime.errors",
    "StoreFault": "provisioner.runtime.errors",
    "classify_file_error": "provisioner.runtime.errors",
    "faults_named": "provisioner.runtime.errors",
    "file_fault": "provisioner.runtime.errors",
    "CATALOG_DEADLINE_S": "provisioner.runtime.gateway.catalog",
    "GatewayCatalog": "provisioner.runtime.gateway.catalog",
    "BrokenAnswer": "provisioner.runtime.gateway.errors",
    "CatalogError": "provisioner.runtime.gateway.errors",
    "CircuitOpen": "provisioner.runtime.gateway.errors",
    "CodedFault": "provisioner.runtime.gateway.errors",
    "ContractBroken": "provisioner.runtime.gateway.errors",
    "GatewayCallTimeout": "provisioner.runtime.gateway.errors",
    "GatewayError": "provisioner.runtime.gateway.errors",
    "MayPass": "provisioner.runtime.gateway.errors",
    "NoAnswer": "provisioner.runtime.gateway.errors",
    "NotNow": "provisioner.runtime.gateway.errors",
    "masked": "provisioner.runtime.gateway.masking",
    "nested_deeper_than": "provisioner.runtime.gateway.protocol",
    "lazy_names": "provisioner.runtime.lazy",
    "MEMORY_TEXT_MAX_CHARS": "provisioner.runtime.loom.answers",
    "MESSAGE_ROLES": "provisioner.runtime.loom.answers",
    "TAGS_MAX": "provisioner.runtime.loom.answers",
    "TAG_MAX_CHARS": "provisioner.runtime.loom.answers",
    "EXTRACT_DEADLINE_S": "provisioner.runtime.loom.backend",
    "LoomMemory": "provisioner.runtime.loom.backend",
    "SHAPES": "provisioner.runtime.loom.context_block",
    "session_context": "provisioner.runtime.loom.context_block",
    "LOOM_OP_TOOL": "provisioner.runtime.loom.contract",
    "since_last_error": "provisioner.runtime.loom.diagnostics",
    "extraction_queue": "provisioner.runtime.loom.queue",
    "CODE_MAX_CHARS": "provisioner.runtime.loom.report",
    "SWEEP_OPS": "provisioner.runtime.loom.report",
    "failure_words": "provisioner.runtime.loom.report",
    "LOOM_NAME_PATTERN": "provisioner.runtime.loom.settings",
    "LOOM_NAME_RULE": "provisioner.runtime.loom.settings",
    "SWEEP_CONCURRENCY_DEFAULT": "provisioner.runtime.loom.settings",
    "SWEEP_CONCURRENCY_MAX": "provisioner.runtime.loom.settings",
    "SWEEP_CONCURRENCY_MIN": "provisioner.runtime.loom.settings",
    "boolean_value": "provisioner.runtime.loom.settings",
    "memory_backend": "provisioner.runtime.loom.settings",
    "whole_number_value": "provisioner.runtime.loom.settings",
    "Extracted": "provisioner.runtime.loom.types",
    "MemoryWrite": "provisioner.runtime.loom.types",
    "WRITE_VERDICTS": "provisioner.runtime.loom.types",
    "WriteVerdict": "provisioner.runtime.loom.types",
    "WRITE_DEADLINE_S": "provisioner.runtime.loom.write",
    "LOOM_SERVER": "provisioner.runtime.memory_contract",
    "NERVE_SERVER": "provisioner.runtime.memory_contract",
    "NerveDatabaseError": "provisioner.runtime.nerve_db.transcripts",
    "NerveTranscripts": "provisioner.runtime.nerve_db.transcripts",
    "BUSY_TIMEOUT_MS": "provisioner.runtime.sqlite_file",
    "AUDIT_MIGRATION_SKIPPED": "provisioner.runtime.state",
    "AUDIT_WENT_BACK": "provisioner.runtime.state",
    "AuditEntry": "provisioner.runtime.state",
    "AuditNote": "provisioner.runtime.state",
    "LEDGER_CONFLICT": "provisioner.runtime.state",
    "LEDGER_FAILING": "provisioner.runtime.state",
    "LEDGER_FINAL_STATUSES": "provisioner.runtime.state",
    "LEDGER_REJECTED": "provisioner.runtime.state",
    "LEDGER_SKIPPED": "provisioner.runtime.state",
    "LEDGER_WRITTEN": "provisioner.runtime.state",
    "LedgerEntry": "provisioner.runtime.state",
    "MigrationRun": "provisioner.runtime.state",
    "ReadOnlyState": "provisioner.runtime.state",
    "StateBusyError": "provisioner.runtime.state",
    "StateStore": "provisioner.runtime.state",
    "StateVersionError": "provisioner.runtime.state",
    "BackfillBusy": "provisioner.runtime.sweep.backfill",
    "backfill_line": "provisioner.runtime.sweep.backfill",
    "parse_backfill": "provisioner.runtime.sweep.backfill",
    "run_backfill": "provisioner.runtime.sweep.backfill",
    "sweep_source": "provisioner.runtime.sweep.source",
    "file_lock": "provisioner.runtime.sweep.lock",
    "lock_path_of": "provisioner.runtime.sweep.lock",
    "STOPPED_BUSY": "provisioner.runtime.sweep.outcomes",
    "STOPPED_DONE": "provisioner.runtime.sweep.outcomes",
    "SWEEP_ERRORS": "provisioner.runtime.sweep.outcomes",
    "SweepProgress": "provisioner.runtime.sweep.outcomes",
    "SweepReport": "provisioner.runtime.sweep.outcomes",
    "UNREACHED_STOPS": "provisioner.runtime.sweep.outcomes",
    "error_kind": "provisioner.runtime.sweep.outcomes",
    "reaction_to": "provisioner.runtime.sweep.outcomes",
    "StateUnreadable": "provisioner.runtime.sweep.plan",
    "plan_from_file": "provisioner.runtime.sweep.plan",
    "Sweeper": "provisioner.runtime.sweep.sweeper",
    "Message": "provisioner.runtime.transcripts",
    "SqliteTranscripts": "provisioner.runtime.transcripts",
    "TranscriptSource": "provisioner.runtime.transcripts",
    "TranscriptsVersionError": "provisioner.runtime.transcripts",
    "instant_of": "provisioner.runtime.transcripts",
    "parsed_time": "provisioner.runtime.transcripts",
    "shown_session_id": "provisioner.runtime.transcripts",
}

__all__ = sorted(_HOME)

__getattr__, __dir__ = lazy_names(__name__, _HOME, globals())
