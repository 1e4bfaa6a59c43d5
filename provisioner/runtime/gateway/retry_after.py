"""Reading a ``Retry-After`` header: delay-seconds or an HTTP date (GW-6).

An HTTP date is measured against the answer's own ``Date`` header when it has one, so the
wait is what the gateway meant even when the two machines' clocks disagree; without it,
against this machine's wall clock. A date in the past means "now" (0 s). A value that is
neither form is ignored (None): a malformed hint must not fail an otherwise clear answer.
A hint longer than ``RETRY_AFTER_CAP_S`` is read as that cap, so a value of hundreds of digits
stays an ordinary number instead of overflowing a float or Python's integer-parsing limit.
"""

from __future__ import annotations

from email.utils import parsedate_to_datetime

RETRY_AFTER_CAP_S = 86_400.0  # our choice: a day; every longer hint means "not today"
_CAP_DIGITS = len(str(int(RETRY_AFTER_CAP_S)))


def parse_retry_after(value: str | None, *, date: str | None, now: float) -> float | None:
    """Seconds to wait according to ``value``, or None when there is no usable hint.

    ``date`` is the answer's ``Date`` header (or None); ``now`` is the wall-clock time in
    seconds since the epoch, used only for an HTTP date without a usable ``Date``.
    """
    if value is None:
        return None
    text = value.strip()
    if text.isascii() and text.isdigit():
        return _capped_seconds(text)
    when = _http_date(text)
    if when is None:
        return None
    reference = _http_date(date) if date is not None else None
    base = reference if reference is not None else now
    return min(max(0.0, when - base), RETRY_AFTER_CAP_S)


def _capped_seconds(digits: str) -> float:
    """ASCII digits as seconds, at most ``RETRY_AFTER_CAP_S``; only a few digits are parsed."""
    significant = digits.lstrip("0")
    if len(significant) > _CAP_DIGITS:
        return RETRY_AFTER_CAP_S
    return min(float(int(significant or "0")), RETRY_AFTER_CAP_S)


def _http_date(text: str) -> float | None:
    """Seconds since the epoch for an HTTP date, or None when ``text`` is not one."""
    try:
        parsed = parsedate_to_datetime(text)
        if parsed is None or parsed.tzinfo is None:
            return None
        return parsed.timestamp()
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
