"""The rule both local servers keep: answer only a request that names this machine (OPS-3).

``nerve dev gateway`` and ``nerve web`` listen on 127.0.0.1 alone, but that does not stop a
web page elsewhere: through DNS rebinding, its own host name can come to resolve to 127.0.0.1,
and the browser then sends the page's requests to the local server. Such a request still names
the page's host in ``Host``, and a cross-site one names the page's origin in ``Origin``. So a
local server answers a request only when ``Host`` names a loopback host and ``Origin``, when
sent, is an ``http``/``https`` origin on one; a header that cannot be parsed does not. Both
servers import this one rule, so they can never disagree. Standard library only.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
ORIGIN_SCHEMES = ("http", "https")


def is_loopback_request(headers: Iterable[tuple[bytes, bytes]]) -> bool:
    """Whether ``Host`` (and ``Origin``, when sent) name loopback; a malformed one does not.

    ``headers`` are a request's raw header pairs, as an ASGI scope holds them. A request
    without ``Host`` is refused, like one naming any other host.
    """
    named = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in headers}
    try:
        host = urlsplit(f"//{named.get('host', '')}").hostname
        if host not in LOOPBACK_HOSTS:
            return False
        origin = named.get("origin")
        if origin is None:
            return True
        parts = urlsplit(origin)
        return parts.scheme in ORIGIN_SCHEMES and parts.hostname in LOOPBACK_HOSTS
    except ValueError:  # an unclosed IPv6 bracket, say: urlsplit refuses it
        return False
