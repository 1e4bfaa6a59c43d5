"""``nerve_sweeper(memory, transcripts=None)``: the host's sweeper, built for its
configuration in one call (NERVE-11).

The sweep's extraction mode (waiting or queued, from ``memory.loom.defer_extraction``) and its
concurrency (``memory.loom.sweep_concurrency``, SWEEP-14) are settings of the Loom backend
``memory`` already read; the state is the one it opened. So the host hands over the backend
and, if it likes, the transcripts to read, and assembles nothing else by hand. Without
transcripts the sweeper reads Nerve's own ``nerve.db`` in Nerve's state folder
(``$NERVE_HOME``, NERVE-7), read only (NERVE-2).

The sweeper is a ``Sweeper`` (``run_once`` never raises for its source or Loom, SWEEP-12);
``close()`` closes the ``nerve.db`` reader it opened itself (never transcripts it was given),
and is safe to call twice.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from provisioner.config.paths import NERVE_DB_FILE, nerve_home
from provisioner.runtime.budget import extraction_mode
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.nerve_db.transcripts import NerveTranscripts
from provisioner.runtime.sweep.sweeper import Sweeper
from provisioner.runtime.transcripts import TranscriptSource


class NerveSweeper(Sweeper):
    """A ``Sweeper`` built from a Loom backend's own settings (see the module docstring)."""

    def __init__(
        self,
        memory: LoomMemory,
        transcripts: TranscriptSource,
        *,
        owned: NerveTranscripts | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        super().__init__(
            memory,
            transcripts,
            memory.state,
            clock=clock,
            mode=extraction_mode(memory.defer_extraction),
            concurrency=memory.sweep_concurrency,
        )
        self.transcripts = transcripts
        self._owned = owned

    def close(self) -> None:
        """Close the ``nerve.db`` reader this sweeper opened; nothing it was given."""
        if self._owned is not None:
            self._owned.close()
            self._owned = None


def nerve_sweeper(
    memory: LoomMemory,
    transcripts: TranscriptSource | None = None,
    *,
    nerve_db: str | os.PathLike[str] | None = None,
    clock: Callable[[], float] | None = None,
) -> NerveSweeper:
    """The sweeper for ``memory``'s configuration, over ``transcripts`` (default: Nerve's
    ``nerve.db`` at ``nerve_db``, else in ``$NERVE_HOME``). ``memory`` must be open (its state
    is the sweep's). ``NerveDatabaseError`` or a ``FileFault`` when that ``nerve.db`` cannot
    be opened; ``ValueError`` for a concurrency outside what the sweep takes."""
    if transcripts is not None:
        return NerveSweeper(memory, transcripts, clock=clock)
    reader = NerveTranscripts(Path(nerve_db) if nerve_db else nerve_home() / NERVE_DB_FILE)
    try:
        return NerveSweeper(memory, reader, owned=reader, clock=clock)
    except BaseException:
        reader.close()
        raise
