"""The Memory page as HTML, rendered on the server (DOC-3).

Jinja2 with autoescape on: every value — a namespace, a gateway URL, a last-error message —
is text, whatever characters it holds. The page needs no JavaScript and reads without its
stylesheet. Its response headers forbid every script and every outside resource as a second
line of defence, so even a value that escaped the escaping would have nothing to run.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined

from provisioner.web.view import BackendView, card_rows

PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; "
        "form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


@cache
def _environment() -> Environment:
    return Environment(
        loader=PackageLoader("provisioner.web", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_memory_page(
    view: BackendView, diagnostics: dict[str, Any], dashboard_configured: bool
) -> str:
    """The page for ``view``; ``dashboard_configured`` says a link was set but not usable."""
    template = _environment().get_template("memory.html")
    return template.render(
        view=view,
        rows=card_rows(diagnostics) if view.backend == "loom" else [],
        dashboard_dropped=dashboard_configured and view.dashboard_url is None,
    )
