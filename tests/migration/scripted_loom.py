"""A scripted Loom behind ``set_memory``: the seam the migration's logic tests use.

It keeps what it stored by key, as Loom does: a key it holds is answered ``duplicate`` and
stored no second time. ``verdicts`` names the verdict a key gets when it is first stored
(``clear`` otherwise). ``faults`` is a queue of outcomes for the next calls, or
``fault_for(key, call_number)`` decides one per call: an exception instance is raised before
Loom looks at the write; ``LOST`` stores the write but the answer never comes back (the
gateway's call limit); ``CRASH`` stores it and then the process dies (``Crash``, not an
``Exception``), before the migration could note the answer. Every call is recorded.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field

from provisioner.runtime.gateway.errors import GatewayCallTimeout
from provisioner.runtime.loom.types import MemoryWrite, WriteVerdict

LOST = "lost"
CRASH = "crash"


class Crash(BaseException):
    """The process died between Loom's answer and the ledger's row."""


@dataclass
class ScriptedLoom:
    verdicts: dict[str, str] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)
    faults: deque[object] = field(default_factory=deque)
    fault_for: Callable[[str, int], object | None] | None = None
    stored: dict[str, MemoryWrite] = field(default_factory=dict)
    times_stored: Counter[str] = field(default_factory=Counter)
    calls: list[str] = field(default_factory=list)
    answers: list[str] = field(default_factory=list)
    log: list[tuple[str, str]] = field(default_factory=list)  # (key, what happened), per call

    async def set_memory(self, write: MemoryWrite) -> WriteVerdict:
        key = write.memory_key
        fault = self._next_fault(key)
        self.calls.append(key)
        if isinstance(fault, BaseException):
            self.log.append((key, type(fault).__name__))
            raise fault
        if key in self.stored:
            verdict = WriteVerdict(key, "duplicate")
        else:
            self.stored[key] = write
            self.times_stored[key] += 1
            verdict = WriteVerdict(key, self.verdicts.get(key, "clear"), self.reasons.get(key))
        if fault in (LOST, CRASH):
            self.log.append((key, str(fault)))
            if fault == LOST:
                raise GatewayCallTimeout("MCP server timed out")
            raise Crash
        self.log.append((key, "answered"))
        self.answers.append(verdict.verdict)
        return verdict

    def _next_fault(self, key: str) -> object | None:
        if self.faults:
            return self.faults.popleft()
        if self.fault_for is not None:
            return self.fault_for(key, len(self.calls))
        return None
