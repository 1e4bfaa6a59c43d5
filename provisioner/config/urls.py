"""The URL rules configuration and the Memory page share (CONF-5, CONF-6).

Only an absolute ``http`` or ``https`` URL with a host is used as a gateway address or shown
as a link; anything with blanks or control characters in it is refused (browsers strip them,
which turns ``java\\tscript:`` back into a scheme). A configured URL carries no user or
password, and an error that quotes a URL hides them, and its query and fragment (REL-14).
Standard library and the runtime only, so the web page can use it without the config loader.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urlsplit

from provisioner.runtime.face import masked

HTTP_SCHEMES = ("http", "https")  # CONF-5, CONF-6


def absolute_http_url(text: str) -> SplitResult | None:
    """The parts of an absolute http(s) URL with a host, or None for anything else."""
    if any(char.isspace() or not char.isprintable() for char in text):
        return None
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        return None
    if parts.scheme not in HTTP_SCHEMES or not parts.hostname:
        return None
    return parts


def has_credentials(parts: SplitResult) -> bool:
    """Whether the URL names a user or a password, even an empty one (``https://@host``)."""
    return parts.username is not None or parts.password is not None


def redacted(text: str) -> str:
    """``text`` quoted, with any URL's user info, query and fragment masked (REL-14)."""
    return masked(repr(text))


__all__ = ["HTTP_SCHEMES", "absolute_http_url", "has_credentials", "masked", "redacted"]
