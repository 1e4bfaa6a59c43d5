"""Each fault row of the dev gateway, seen through LoomMemory as its outcome class (GW-5).

Extraction is one attempt under the EXTRACTION policy, so the class the gateway client sorts
an answer into reaches the caller unchanged. The rows that need the caller's own deadline to
pass (a hang, a trickle of pings) are seen through the health probe's 5 s instead of the
extraction's 130 s.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from provisioner.devgateway import RunningGateway
from provisioner.runtime.gateway.errors import (
    BodyTooLarge,
    BrokenAnswer,
    CodedFault,
    ContractBroken,
    CountsForBreaker,
    GatewayCallTimeout,
    GatewayError,
    InternalFault,
    MayPass,
    NoAnswer,
    NotNow,
    PolicyRefused,
    RequestTooBig,
)
from provisioner.runtime.loom.backend import LoomMemory
from provisioner.runtime.transcripts import Message

from .config_files import loom_config

pytestmark = pytest.mark.anyio

MESSAGES = [Message(id=1, role="user", content="likes tea", created_at="2026-11-30T09:00:00Z")]

ROWS: list[tuple[str, type[GatewayError], type[GatewayError]]] = [
    # (fault, outcome class, the group a caller branches on)
    ("policy", PolicyRefused, PolicyRefused),
    ("may-pass", MayPass, NotNow),
    ("coded", CodedFault, NotNow),
    ("coded:GRANT_BUSY", CodedFault, NotNow),
    ("uncoded", InternalFault, InternalFault),
    ("call-limit", GatewayCallTimeout, RequestTooBig),
    ("too-large", BodyTooLarge, RequestTooBig),
    ("429", MayPass, NotNow),
    ("502", MayPass, NotNow),
    ("503", MayPass, NotNow),
    ("504", GatewayCallTimeout, NotNow),
    ("cut", BrokenAnswer, ContractBroken),
    ("reset", BrokenAnswer, ContractBroken),
]


class TestFaultRows:
    @pytest.mark.parametrize(("fault", "outcome", "group"), ROWS, ids=[row[0] for row in ROWS])
    async def test_an_extraction_meets_the_row_s_outcome_class(
        self,
        tmp_path: Path,
        gateway: RunningGateway,
        fault: str,
        outcome: type[GatewayError],
        group: type[GatewayError],
    ) -> None:
        gateway.app.faults.switch(fault)
        async with LoomMemory.from_config(loom_config(tmp_path, gateway.base_url)) as memory:
            with pytest.raises(outcome) as raised:
                await memory.extract(MESSAGES, session_id="s-1")
            noted = memory.diagnostics()["last_error"]
        assert isinstance(raised.value, group)
        assert noted["kind"] == outcome.__name__
        assert len(gateway.app.calls) == 1, "extraction is one attempt"

    async def test_a_coded_fault_carries_loom_s_code(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        gateway.app.faults.switch("coded:GRANT_BUSY")
        async with LoomMemory.from_config(loom_config(tmp_path, gateway.base_url)) as memory:
            with pytest.raises(CodedFault) as raised:
                await memory.extract(MESSAGES, session_id="s-1")
        assert raised.value.code == "GRANT_BUSY"

    async def test_429_carries_its_retry_after_and_extraction_does_not_wait_it_out(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        """GW-6: extraction never waits on Retry-After; the caller gets it to schedule by."""
        gateway.app.faults.switch("429:2")
        async with LoomMemory.from_config(loom_config(tmp_path, gateway.base_url)) as memory:
            with pytest.raises(MayPass) as raised:
                await memory.extract(MESSAGES, session_id="s-1")
        assert raised.value.retry_after_s == 2.0

    async def test_a_body_over_the_gateway_s_byte_limit_is_413(
        self, tmp_path: Path, gateway: RunningGateway
    ) -> None:
        gateway.app.faults.switch("too-large:2048")
        big = [Message(id=2, role="user", content="x" * 4096, created_at=MESSAGES[0].created_at)]
        async with LoomMemory.from_config(loom_config(tmp_path, gateway.base_url)) as memory:
            assert (await memory.extract(MESSAGES, session_id="s-1")).accepted == 1
            with pytest.raises(BodyTooLarge):
                await memory.extract(big, session_id="s-1")

    @pytest.mark.slow
    @pytest.mark.parametrize("fault", ["hang", "trickle"])
    async def test_no_answer_in_time_is_no_answer_and_opens_the_breaker(
        self, tmp_path: Path, gateway: RunningGateway, fault: str
    ) -> None:
        """GW-4, GW-7: keep-alive pings do not stretch the deadline."""
        gateway.app.faults.switch(fault)
        async with LoomMemory.from_config(loom_config(tmp_path, gateway.base_url)) as memory:
            with pytest.raises(NoAnswer) as raised:
                await memory.health()
            assert memory.diagnostics()["breaker"]["state"] == "open"
            assert memory.available is False
        assert isinstance(raised.value, CountsForBreaker)
