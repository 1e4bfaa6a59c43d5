"""How deep a JSON text nests, measured before it is parsed.

Python's JSON decoder recurses once per array or object it opens, so a hostile text of many
thousand brackets exhausts the interpreter's stack. Whoever parses JSON from someone else —
an answer from a gateway, a request to the dev gateway, a line of ``nerve memory import`` —
can ask ``nested_deeper_than`` first and refuse the text in one line instead.
"""

from __future__ import annotations

import itertools
import operator
import re

_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKET = bytes(byte for byte in range(256) if byte not in b"[]{}")
_BRACKET_STEP = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")


def nested_deeper_than(text: bytes, limit: int) -> bool:
    """Whether the JSON in ``text`` opens more than ``limit`` arrays or objects at once.

    One linear pass without recursion, all of it in C: strings are cut out (a bracket in a
    string is text), every other byte but a bracket is dropped, and the running depth is
    summed until it first passes ``limit``. Exact for UTF-8, where no byte of a multi-byte
    character looks like a quote, a backslash or a bracket; for anything else it may misjudge,
    which the decoder's own refusal then settles.
    """
    brackets = _JSON_STRING.sub(b"", text).translate(None, _NOT_BRACKET)
    steps = itertools.accumulate(brackets.translate(_BRACKET_STEP))  # twice the opens so far
    depths = map(operator.sub, steps, itertools.count(1))  # opens minus closes
    return next(filter(limit.__lt__, depths), None) is not None
