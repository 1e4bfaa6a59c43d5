"""The Memory page in a real browser: Chromium, driven by Playwright (DOC-3).

What a person sees under each backend; a dashboard address that is not absolute http(s) never
becomes a link; and a hostile last-error message shows as text and runs nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.fakes.gateway import FakeGateway
from tests.support.loopback import LoopbackServer
from tests.web.serving import DiagnosticsSnapshot, Serve
from tests.web.test_memory_routes import loom_config

HOSTILE_MESSAGES = [
    "<img src=x onerror=\"document.title='pwned'\">",
    "</div><script>document.title='pwned'</script>",
    "</dd></dl></section><a href=\"javascript:document.title='pwned'\">click</a>",
]
LAST_ERROR_AT = 1_764_604_585.0  # 2025-12-01 15:56:25 UTC

pytestmark = pytest.mark.slow


def diagnostics(message: str = "the gateway answered HTTP 503") -> dict[str, Any]:
    return {
        "gateway_url": "http://127.0.0.1:8787",
        "catalog": {"generation": 7, "lists_loom": True, "tools": ["loom_search"]},
        "identity": {
            "org": "acme",
            "org_source": "loom",
            "namespace": "ada",
            "namespace_source": "config",
        },
        "breaker": {"state": "open", "retry_in_s": 12.5},
        "last_error": {
            "at": LAST_ERROR_AT,
            "op": "health",
            "outcome": "MayPass",
            "message": message,
        },
    }


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page that records every dialog a script might open."""
    context = browser.new_context()
    page = context.new_page()
    page.dialogs = []  # type: ignore[attr-defined]
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    yield page
    context.close()


class TestWhatAPersonSees:
    def test_under_loom_the_page_says_loom_links_the_dashboard_and_shows_the_card(
        self, page: Any, serve: Serve
    ) -> None:
        base = serve(loom_config("https://loom.example/ns/ada"), DiagnosticsSnapshot(diagnostics()))
        page.goto(f"{base}/memory")
        assert page.title() == "Memory · Nerve"
        assert "Memory is kept in Loom" in page.inner_text("#kept-in")
        link = page.get_by_role("link", name="Open Loom's dashboard")
        assert link.get_attribute("href") == "https://loom.example/ns/ada"
        card = page.inner_text("#diagnostics")
        for shown in (
            "Gateway",
            "http://127.0.0.1:8787",
            "generation",
            "7",
            "namespace",
            "ada",
            "namespace from",
            "config",
            "Breaker",
            "open",
            "Last error",
            "2025-12-01 15:56:25 UTC",
            "the gateway answered HTTP 503",
        ):
            assert shown in card, shown

    def test_under_memu_the_page_says_memu_holds_memory_and_has_no_card(
        self, page: Any, serve: Serve, configure
    ) -> None:
        base = serve(configure("memory:\n  backend: memu\n"))
        page.goto(f"{base}/memory")
        assert "Memory is kept in memU" in page.inner_text("#kept-in")
        assert page.locator("#diagnostics").count() == 0
        assert page.locator("a").count() == 0

    def test_the_page_reads_the_same_with_javascript_off(self, browser: Any, serve: Serve) -> None:
        """Server-rendered: nothing on the page needs a script."""
        context = browser.new_context(java_script_enabled=False)
        try:
            page = context.new_page()
            base = serve(loom_config(None), DiagnosticsSnapshot(diagnostics()))
            page.goto(f"{base}/memory")
            assert "Memory is kept in Loom" in page.inner_text("#kept-in")
            assert "the gateway answered HTTP 503" in page.inner_text("#diagnostics")
        finally:
            context.close()


class TestDashboardLink:
    @pytest.mark.parametrize(
        "url", ["javascript:document.title='pwned'", "/relative/dashboard", "loom.example/ns"]
    )
    def test_an_address_that_is_not_absolute_http_never_becomes_a_link(
        self, page: Any, serve: Serve, url: str
    ) -> None:
        page.goto(f"{serve(loom_config(url), DiagnosticsSnapshot(diagnostics()))}/memory")
        assert page.locator("a").count() == 0
        assert "Memory is kept in Loom" in page.inner_text("#kept-in")

    def test_an_address_the_loader_dropped_is_explained_not_linked(
        self, page: Any, serve: Serve, configure
    ) -> None:
        config = configure(
            "memory:\n  backend: loom\n  loom:\n    dashboard_url: 'javascript:alert(1)'\n"
        )
        page.goto(f"{serve(config)}/memory")
        assert page.locator("a").count() == 0
        assert "not an absolute http or https URL" in page.inner_text("#dashboard")


class TestHostileText:
    @pytest.mark.parametrize("message", HOSTILE_MESSAGES)
    def test_a_hostile_last_error_shows_as_text_and_runs_nothing(
        self, page: Any, serve: Serve, message: str
    ) -> None:
        base = serve(loom_config(None), DiagnosticsSnapshot(diagnostics(message)))
        page.goto(f"{base}/memory")
        page.wait_for_load_state("load")
        assert message in page.inner_text("#diagnostics")
        assert page.title() == "Memory · Nerve", "no script ran"
        assert page.dialogs == []
        assert page.locator("#diagnostics img, #diagnostics script, #diagnostics a").count() == 0
        assert page.locator("main > *").count() == 3, "the card was not broken out of"

    def test_hostile_namespace_and_gateway_values_stay_text(self, page: Any, serve: Serve) -> None:
        hostile = diagnostics()
        hostile["identity"]["namespace"] = "<b id=injected>ada</b>"
        hostile["gateway_url"] = "javascript:document.title='pwned'"
        page.goto(f"{serve(loom_config(None), DiagnosticsSnapshot(hostile))}/memory")
        card = page.inner_text("#diagnostics")
        assert "<b id=injected>ada</b>" in card
        assert page.locator("#injected").count() == 0
        assert page.locator("a").count() == 0


@pytest.fixture(scope="module")
def dev_gateway() -> Iterator[Any]:
    from provisioner.devgateway import serve_in_thread

    with serve_in_thread(seed=5) as gateway:
        yield gateway


class TestWithTheRealBackend:
    """The page over a real ``LoomMemory``, opened and probed as Nerve would (LOOM-4)."""

    def test_the_card_shows_what_the_health_probe_learned(
        self, page: Any, serve_live: Serve, configure, dev_gateway: Any
    ) -> None:
        config = configure(
            "memory:\n  backend: loom\n  loom:\n    org: acme\n"
            f"mcp_gateway_url: {dev_gateway.base_url}\n"
        )
        page.goto(f"{serve_live(config)}/memory")
        card = page.inner_text("#diagnostics")
        assert dev_gateway.base_url in card
        assert "acme" in card and "agent" in card, card
        assert "lists loom\tyes" in card or "lists loom\nyes" in card, card

    @pytest.mark.parametrize("message", HOSTILE_MESSAGES)
    def test_a_hostile_refusal_from_the_gateway_shows_as_text_and_runs_nothing(
        self, page: Any, serve_live: Serve, configure, message: str
    ) -> None:
        """The gateway's refusal message reaches the card through the runtime, as text."""
        gateway = FakeGateway(refusal=message)
        server = LoopbackServer(gateway)
        try:
            url = server.start()
            config = configure(f"memory:\n  backend: loom\nmcp_gateway_url: {url}\n")
            page.goto(f"{serve_live(config)}/memory")
            card = page.inner_text("#diagnostics")
            assert message in card, card
            assert "PolicyRefused" in card and "health" in card
            assert page.title() == "Memory · Nerve", "no script ran"
            assert page.dialogs == []
            assert (
                page.locator("#diagnostics img, #diagnostics script, #diagnostics a").count() == 0
            )
        finally:
            server.stop()
