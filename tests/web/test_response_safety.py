"""Every answer of the Memory page's routes is safe to open in a browser (DOC-3, CONF-5).

The values these routes show come from configuration, which a platform, an environment variable
or a hostile workspace may have filled, and from Loom's error messages. The HTML page escapes
them; the JSON routes must be just as safe: the page's security headers on every answer, and
``<``, ``>``, ``&`` written as JSON escapes so a body can never be read as markup.
"""

from __future__ import annotations

from datetime import UTC, datetime

import httpx
import pytest

from tests.web.serving import DiagnosticsSnapshot, Serve
from tests.web.test_memory_routes import LOOM, loom_config

HOSTILE_DASHBOARD = "https://loom.example/<script>alert(1)</script>?a=1&b=<i>"
HOSTILE_MESSAGE = "</script><script>alert('x')</script>\u2028<img src=x onerror=alert(1)>&amp;"


def assert_security_headers(answer: httpx.Response) -> None:
    """The headers the Memory page sends: no script, no outside resource, no sniffing."""
    policy = answer.headers.get("content-security-policy", "")
    assert "default-src 'none'" in policy, answer.headers
    assert "script-src" not in policy
    assert answer.headers.get("x-content-type-options") == "nosniff"
    assert answer.headers.get("referrer-policy") == "no-referrer"
    assert answer.headers.get("cache-control") == "no-store"


class TestEveryAnswerCarriesTheSecurityHeaders:
    @pytest.mark.parametrize(
        ("method", "path", "status"),
        [
            ("GET", "/memory", 200),
            ("GET", "/api/memory/backend", 200),
            ("GET", "/api/diagnostics/memory", 200),
            ("HEAD", "/api/memory/backend", 200),
            ("PUT", "/api/memory/memu/items/1", 409),
            ("POST", "/api/memory/backend", 405),
            ("DELETE", "/memory", 405),
        ],
    )
    def test_the_page_the_json_and_the_refusals_send_the_page_s_headers(
        self, serve: Serve, configure, method: str, path: str, status: int
    ) -> None:
        """JSON answers used to go out without nosniff or a CSP, unlike the page."""
        base = serve(configure(LOOM))
        answer = httpx.request(method, f"{base}{path}")
        assert answer.status_code == status
        assert_security_headers(answer)

    def test_a_method_a_route_does_not_take_is_a_json_405_naming_the_allowed_ones(
        self, serve: Serve, configure
    ) -> None:
        answer = httpx.post(f"{serve(configure(LOOM))}/api/diagnostics/memory")
        assert answer.status_code == 405
        assert answer.headers["allow"] == "GET, HEAD"
        assert "not allowed" in answer.json()["error"]


class TestJsonIsNeverMarkup:
    def test_a_dashboard_address_holding_a_script_tag_is_escaped_in_the_json(
        self, serve: Serve
    ) -> None:
        """CONF-5 lets this URL be a link (it is absolute https); the JSON must not echo it raw."""
        answer = httpx.get(f"{serve(loom_config(HOSTILE_DASHBOARD))}/api/memory/backend")
        assert answer.headers["content-type"].startswith("application/json")
        for character in "<>&":
            assert character not in answer.text, answer.text
        assert "\\u003cscript\\u003e" in answer.text
        assert answer.json()["dashboard_url"] == HOSTILE_DASHBOARD

    def test_a_hostile_error_message_in_the_diagnostics_is_escaped_and_reads_back_the_same(
        self, serve: Serve, configure
    ) -> None:
        """LOOM-4: a last-error message is Loom's text; parsed, it is exactly what was given."""
        snapshot = {"last_error": {"message": HOSTILE_MESSAGE, "op": "health"}}
        base = serve(configure(LOOM), DiagnosticsSnapshot(snapshot))
        answer = httpx.get(f"{base}/api/diagnostics/memory")
        assert answer.status_code == 200
        for character in "<>&\u2028":
            assert character not in answer.text, answer.text
        assert answer.json()["last_error"]["message"] == HOSTILE_MESSAGE

    def test_diagnostics_holding_values_json_cannot_carry_are_still_answered(
        self, serve: Serve, configure
    ) -> None:
        """A backend's diagnostics with a set or a time are shown as a list and as text."""
        moment = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
        snapshot = {"tools": {"loom_search", "loom_context_pack"}, "checked_at": moment}
        base = serve(configure(LOOM), DiagnosticsSnapshot(snapshot))
        answer = httpx.get(f"{base}/api/diagnostics/memory")
        assert answer.status_code == 200
        assert answer.json()["tools"] == ["loom_context_pack", "loom_search"]
        assert answer.json()["checked_at"] == str(moment)
