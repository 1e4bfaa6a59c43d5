"""Nerve's own database, read as the sweep's transcripts source (NERVE-2, NERVE-3, MIG-2).

``transcripts`` (``NerveTranscripts``: Nerve's ``nerve.db`` read only, its messages in the
sweep's terms, its ``last_memorized_at`` kept in step) and ``memorized`` (where memU's
memorization stopped, read from ``last_memorized_at``). Part of the runtime: the engine, the
command line and a fleet switch read Nerve's conversations through it alike.
"""
