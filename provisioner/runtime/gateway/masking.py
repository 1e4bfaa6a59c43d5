"""Credentials kept out of every line the package prints (REL-14).

A gateway URL may carry a secret in three places: its user info (``https://user:pass@host``),
its query (``?token=…``) and its fragment (``#…``). The configuration refuses such a URL, but
the line that refuses it, doctor's report of it, an error quoting a list that holds it, must
not print the secret back. ``masked`` finds every ``scheme://…`` in a text, whatever the text
is (a value, a ``repr`` of a list or mapping, a whole report line), and replaces those three
parts with ``***``; the rest of the URL stays, so the line still says which gateway it means.
Standard library only: the runtime, the configuration and the command line all use it.
"""

from __future__ import annotations

import re

MASK = "***"  # REL-14: what stands in for a URL's user info, query or fragment
# A quoted URL (a value an error quotes, one in a list's repr): all of it up to the closing
# quote, blanks included, since a refused value may hold any.
_QUOTED_URL = re.compile(r"""(['"])([A-Za-z][A-Za-z0-9+.-]*://[^'"\n]*)\1""")
# A URL anywhere else: a scheme, then everything up to a blank, a quote or a bracket.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>()\[\]{}]*")


def masked(text: str) -> str:
    """``text`` with the user info, query and fragment of every URL in it replaced by
    ``***`` (REL-14); text without a URL is returned unchanged."""
    if "://" not in text:
        return text
    text = _QUOTED_URL.sub(lambda found: f"{found[1]}{_masked_url(found[2])}{found[1]}", text)
    return _URL.sub(lambda found: _masked_url(found[0]), text)  # a masked URL stays as it is


def _masked_url(url: str) -> str:
    scheme, rest = url.split("://", 1)
    end = min((rest.find(mark) for mark in "/?#" if mark in rest), default=len(rest))
    authority, tail = rest[:end], rest[end:]
    if "@" in authority:
        authority = f"{MASK}@{authority.rsplit('@', 1)[1]}"
    before_fragment, hash_mark, _fragment = tail.partition("#")
    path, question_mark, _query = before_fragment.partition("?")
    return f"{scheme}://{authority}{path}{question_mark and '?' + MASK}{hash_mark and '#' + MASK}"
