"""Where a running sweep is, on stderr: so a hung Loom never looks like a frozen sweep (SWEEP-14).

``nerve memory sweep`` tells a ``ProgressPrinter`` every step of its windows. On a terminal one
line is redrawn in place every ``TICK_S`` with the session, the batch and how long Loom has been
waiting of its deadline; without one, a line goes to stderr at most every ``PROGRESS_EVERY_S``
once a sweep has run that long. With sessions swept side by side, the batch held longest is
shown, with how many are in flight. Lines name sessions and counts, never a message's text.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from provisioner.base.counts import counted

if TYPE_CHECKING:
    from provisioner.runtime.face import SweepProgress, SweepReport

PROGRESS_EVERY_S = 10  # our choice: without a terminal, at most one progress line this often
TICK_S = 1.0  # our choice: how often the waiting time is redrawn while a batch is out
LINE_WIDTH = 79  # our choice: the progress line fits a classic terminal, so \r redraws it
SESSION_SHOWN_CHARS = 24  # our choice: how much of a session id a progress line shows


async def sweep_with_progress(
    sweeper: Any, printer: ProgressPrinter, *, tick_s: float = TICK_S
) -> SweepReport:
    """``sweeper.run_once`` with ``printer`` told every step and ticked every ``tick_s``.

    The ticks redraw the time Loom has been waiting while a batch is out (the printer's own
    clock measures it); they stop with the sweep, however it ends.
    """

    async def tick() -> None:
        while True:
            await asyncio.sleep(tick_s)
            printer.tick()

    ticker = asyncio.create_task(tick())
    try:
        report: SweepReport = await sweeper.run_once(progress=printer)
    finally:
        ticker.cancel()
        printer.finish()
    return report


class ProgressPrinter:
    """Shows where a sweep is on ``stream`` (stderr), so a hung Loom never looks frozen.

    On a terminal: one line, redrawn in place, with the session, the batch and "waiting for
    Loom: N s of 130 s" while a batch is out. Otherwise: a line at most every
    ``PROGRESS_EVERY_S``, the first once the sweep has run that long, so a short sweep prints
    none. ``clock`` (monotonic seconds) times both; tests hand it a fake one. A stream that
    fails to take a write (a closed terminal, say) ends the printing, never the sweep.

    With sessions swept side by side (SWEEP-14), every batch out is kept: the line shows the
    one Loom has held longest, and how many sessions are in flight when more than one is.
    """

    def __init__(
        self,
        stream: TextIO,
        *,
        clock: Callable[[], float] = time.monotonic,
        deadline_s: float | None = None,
    ) -> None:
        if deadline_s is None:
            from provisioner.runtime.face import EXTRACT_DEADLINE_S

            deadline_s = EXTRACT_DEADLINE_S
        self._stream = stream
        self._clock = clock
        self._deadline_s = deadline_s
        self._terminal = _is_terminal(stream)
        self._last_line_at = clock()  # the sweep's start, then each line written
        self._at: SweepProgress | None = None
        self._waiting: dict[str, tuple[int, float]] = {}  # batches out: session -> batch, since
        self._drawn = ""
        self._broken = False

    def __call__(self, progress: SweepProgress) -> None:
        """A step of the sweep: a batch out, a batch back, a session done."""
        session_id, batch = progress.session_id, progress.batch
        if session_id is not None and not progress.waiting:
            self._waiting.pop(session_id, None)
        elif session_id is not None and self._waiting.get(session_id, (0, 0.0))[0] != batch:
            self._waiting[session_id] = (batch, self._clock())  # a new batch: its wait starts
        self._at = progress
        self._show()

    def tick(self) -> None:
        """Time passed: redraw the waiting time (terminal) or write a line when one is due."""
        self._show()

    def finish(self) -> None:
        """The sweep ended: end the terminal's line so the report starts on its own."""
        if self._terminal and self._drawn:
            self._write("\n")
            self._drawn = ""

    def _show(self) -> None:
        if self._at is None or self._broken:
            return
        if self._terminal:
            text = self._line(terminal=True)[:LINE_WIDTH]
            if text != self._drawn:
                self._write("\r" + text.ljust(LINE_WIDTH))
                self._drawn = text
            return
        now = self._clock()
        if now - self._last_line_at >= PROGRESS_EVERY_S:
            self._write(self._line(terminal=False) + "\n")
            self._last_line_at = now

    def _line(self, *, terminal: bool) -> str:
        at = self._at
        assert at is not None
        if self._waiting:
            return self._waiting_line(at, terminal=terminal)
        line = (
            f"sessions {at.sessions_done}/{at.sessions_total}, "
            f"{counted(at.messages_taken, 'message')} taken, budget {at.budget.describe()}"
        )
        return line if terminal else f"sweep: {line}"

    def _waiting_line(self, at: SweepProgress, *, terminal: bool) -> str:
        """The batch Loom has held longest; on a terminal, the session id is cut to fit."""
        session_id, (batch, since) = min(self._waiting.items(), key=lambda out: out[1][1])
        waited = max(0, int(self._clock() - since))
        head = f"session {at.sessions_done + 1}/{at.sessions_total} "
        tail = f", batch {batch}: waiting for Loom: {waited} s of {self._deadline_s:g} s"
        more = f"; {at.in_flight} in flight" if at.in_flight > 1 else ""
        if terminal:
            room = LINE_WIDTH - len(head) - len(tail) - len(more)
            return f"{head}{_shown(session_id, room)}{tail}{more}"
        taken = counted(at.messages_taken, "message")
        return f"sweep: {head}{_shown(session_id)}{tail}; {taken} taken{more}"

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # the stream went away; the sweep goes on
            self._broken = True


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return False


def _shown(session_id: str, room: int = SESSION_SHOWN_CHARS) -> str:
    """A session id as progress shows it: printable, cut to min(room, SESSION_SHOWN_CHARS)."""
    from provisioner.runtime.face import shown_session_id

    width = max(1, min(SESSION_SHOWN_CHARS, room))
    shown = shown_session_id(session_id)
    return shown if len(shown) <= width else shown[: width - 1] + "…"
