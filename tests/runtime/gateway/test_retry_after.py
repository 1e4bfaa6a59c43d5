"""Reading Retry-After as delay-seconds or as an HTTP date (GW-6)."""

from __future__ import annotations

from email.utils import formatdate

import pytest

from provisioner.runtime.gateway.retry_after import parse_retry_after

NOW = 1_800_000_000.0


class TestRetryAfter:
    @pytest.mark.parametrize(("value", "expected"), [("1", 1.0), (" 120 ", 120.0), ("0", 0.0)])
    def test_delay_seconds_are_read_as_seconds(self, value: str, expected: float) -> None:
        assert parse_retry_after(value, date=None, now=NOW) == expected

    def test_an_http_date_is_measured_against_the_answers_date(self) -> None:
        server_now = NOW - 3600  # the gateway's clock is an hour behind ours
        value = formatdate(server_now + 2, usegmt=True)
        date = formatdate(server_now, usegmt=True)
        assert parse_retry_after(value, date=date, now=NOW) == 2.0

    def test_an_http_date_without_a_date_header_uses_the_wall_clock(self) -> None:
        assert parse_retry_after(formatdate(NOW + 5, usegmt=True), date=None, now=NOW) == 5.0

    def test_a_date_in_the_past_means_now(self) -> None:
        assert parse_retry_after(formatdate(NOW - 60, usegmt=True), date=None, now=NOW) == 0.0

    @pytest.mark.parametrize("value", [None, "", "soon", "-1", "1.5", "²"])
    def test_anything_else_is_no_hint(self, value: str | None) -> None:
        assert parse_retry_after(value, date=None, now=NOW) is None
