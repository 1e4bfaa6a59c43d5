"""Every kind of row in the state file's audit log (``sweep_audit``), named once.

The sweep, its start point and backfill, the queued follow-up and the migration all write to
the one audit table, and ``nerve memory status``, doctor and the Diagnostics card read it back
by kind. Keeping the names here, in a module that imports nothing, lets doctor read them without
loading the runtime's HTTP client, and lets a test hold that no kind is named twice.

A row names a session, a message id, a role and times, never the text of a message; the
comment on each kind says what its ``detail`` holds. The names are our choice.
"""

from __future__ import annotations

# The sweep (SWEEP-4, SWEEP-5, SWEEP-8, SWEEP-11, NERVE-3).
AUDIT_QUEUED = "queued"  # SWEEP-4: a batch Loom queued (detail: its queue id and size)
AUDIT_SKIPPED = "skipped"  # SWEEP-8: the one message Loom fails on, left out for good
AUDIT_CUT = "cut"  # SWEEP-11: a message sent cut to fit the byte budget
AUDIT_BUDGET = "budget"  # SWEEP-5: the batch budget was halved (detail: why, and the new one)
AUDIT_WENT_BACK = "went_back"  # NERVE-3: the source went back; the watermark was re-aligned

# SWEEP-13: a row per batch, which `nerve memory status` counts; ``audit()`` leaves them out.
AUDIT_BATCH = "batch"  # a batch Loom took in waiting mode (detail: how many messages)
AUDIT_FAILED = "failed"  # a batch sent that did not go through (detail: its kind and code)
AUDIT_BATCH_KINDS = (AUDIT_BATCH, AUDIT_FAILED)

# Where the sweep starts after a switch from memU, and backfill (MIG-2).
AUDIT_LEFT_TO_MEMU = "left_to_memu"  # a session started after memU's point (detail: messages=N)
AUDIT_BACKFILL = "backfill"  # a watermark moved back on purpose (detail: through=W resume=P)
AUDIT_BACKFILL_DONE = "backfill_done"  # memU's share sent: on to where it stood (detail: W -> P)

# The queued follow-up (SWEEP-15): ids, counts and states only.
AUDIT_WRITTEN = "written"  # a queued batch written; the watermark moved past it
AUDIT_REPLAYED = "replayed"  # a failed batch queued again, its one replay
AUDIT_FELL_BACK = "fell_back"  # a batch that will be sent again in waiting mode
AUDIT_FOLLOW_UP_KINDS = (AUDIT_WRITTEN, AUDIT_REPLAYED, AUDIT_FELL_BACK)

# The migration from memU (MIG-1).
AUDIT_MIGRATION_SKIPPED = "migration_skipped"  # an item skipped (detail: its id and why)

AUDIT_KINDS = (
    AUDIT_QUEUED,
    AUDIT_SKIPPED,
    AUDIT_CUT,
    AUDIT_BUDGET,
    AUDIT_WENT_BACK,
    *AUDIT_BATCH_KINDS,
    AUDIT_LEFT_TO_MEMU,
    AUDIT_BACKFILL,
    AUDIT_BACKFILL_DONE,
    *AUDIT_FOLLOW_UP_KINDS,
    AUDIT_MIGRATION_SKIPPED,
)
"""Every kind, in the order above."""
AUDIT_SHOWN_KINDS = tuple(kind for kind in AUDIT_KINDS if kind not in AUDIT_BATCH_KINDS)
"""What ``nerve memory status`` lists by default: every kind but the per-batch rows."""
