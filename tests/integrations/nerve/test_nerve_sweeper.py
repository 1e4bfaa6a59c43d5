"""``nerve_sweeper``: the host's sweeper built for the Loom backend's configuration in one
call (NERVE-11): mode, concurrency and state from the backend; Nerve's ``nerve.db`` by default."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from provisioner.integrations.nerve import NerveTranscripts, nerve_sweeper
from provisioner.runtime import LoomMemory
from provisioner.runtime.budget import QUEUED, WAITING
from testbed.nerve_db import NerveDb, native

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def opened(tmp_path: Path, **values: object) -> AsyncIterator[LoomMemory]:
    memory = await LoomMemory(state_path=tmp_path / "state.sqlite3", **values).open()  # type: ignore[arg-type]
    try:
        yield memory
    finally:
        await memory.aclose()


class TestBuiltForTheConfiguration:
    @pytest.mark.parametrize(("defer", "mode"), [(False, WAITING), (True, QUEUED)])
    async def test_mode_concurrency_and_state_are_the_backends(
        self, tmp_path: Path, defer: bool, mode: object
    ) -> None:
        nerve = NerveDb(tmp_path / "nerve.db")
        async for memory in opened(tmp_path, defer_extraction=defer, sweep_concurrency=3):
            with NerveTranscripts(nerve.path) as transcripts:
                sweeper = nerve_sweeper(memory, transcripts)
                assert (sweeper.mode, sweeper.concurrency) == (mode, 3)
                assert sweeper.transcripts is transcripts
                sweeper.close()  # what it was given stays open
                assert transcripts.sessions() == []
        nerve.close()

    async def test_without_transcripts_it_reads_nerve_db_in_nerve_home_and_closes_it(
        self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("NERVE_HOME", str(tmp_path / "state"))
        nerve = NerveDb(tmp_path / "state" / "nerve.db")
        nerve.session("a")
        nerve.add("a", "user", "hello", created_at=native(1))
        async for memory in opened(tmp_path):
            sweeper = nerve_sweeper(memory)
            assert isinstance(sweeper.transcripts, NerveTranscripts)
            assert sweeper.transcripts.location == str(tmp_path / "state" / "nerve.db")
            assert sweeper.transcripts.sessions() == ["a"]
            sweeper.close()
            sweeper.close()  # twice is safe
        nerve.close()
