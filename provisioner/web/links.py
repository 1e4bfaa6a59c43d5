"""Which addresses may become a link on the Memory page (CONF-5).

The dashboard address comes from configuration, which a platform, an environment variable or
a hostile workspace may have filled. Only an absolute ``http`` or ``https`` URL with a host
becomes a link: ``javascript:``, ``data:``, a relative path, or anything with blanks or
control characters in it (which browsers strip, turning ``java\\tscript:`` back into a
scheme) stays plain text, or is not shown at all. The loader drops such values already; the
page checks again, because a ``Config`` can be built without the loader.
"""

from __future__ import annotations

from provisioner.config.urls import absolute_http_url


def safe_link(url: str | None) -> str | None:
    """``url`` when it may be an ``href``, else None."""
    if not url or absolute_http_url(url) is None:
        return None
    return url
