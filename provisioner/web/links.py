"""Which addresses may become a link on the Memory page (CONF-5).

The dashboard address comes from configuration, which a platform, an environment variable or
a hostile workspace may have filled. Only an absolute ``http`` or ``https`` URL with a host
becomes a link: ``javascript:``, ``data:``, a relative path, or anything with blanks or
control characters in it (which browsers strip, turning ``java\\tscript:`` back into a
scheme) stays plain text, or is not shown at all. The loader drops such values already; the
page checks again, because a ``Config`` can be built without the loader.
"""

from __future__ import annotations

from urllib.parse import urlsplit

LINK_SCHEMES = ("http", "https")  # CONF-5


def safe_link(url: str | None) -> str | None:
    """``url`` when it may be an ``href``, else None."""
    if not url or any(char.isspace() or not char.isprintable() for char in url):
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return None
    if parts.scheme not in LINK_SCHEMES or not parts.hostname:
        return None
    return url
