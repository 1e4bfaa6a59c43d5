"""A count reads in the right number everywhere the package prints one (issue 18, point 10)."""

from __future__ import annotations

import pytest

from provisioner.base.counts import counted


@pytest.mark.parametrize(
    ("number", "noun", "expected"),
    [
        (0, "message", "0 messages"),
        (1, "message", "1 message"),
        (2, "session", "2 sessions"),
        (1, "batch", "1 batch"),
        (3, "batch", "3 batches"),
        (1, "bad line", "1 bad line"),
        (5, "bad line", "5 bad lines"),
        (-1, "file", "-1 files"),
    ],
)
def test_a_count_takes_the_number_of_its_noun(number: int, noun: str, expected: str) -> None:
    assert counted(number, noun) == expected


def test_a_named_plural_wins_over_the_rule() -> None:
    assert counted(2, "child", "children") == "2 children"
    assert counted(1, "child", "children") == "1 child"


def test_the_nouns_ending_in_y_or_ch_the_package_counts_are_spelled_right() -> None:
    assert counted(2, "memory") == "2 memories"
    assert counted(2, "entry") == "2 entries"
    assert counted(2, "batch") == "2 batches"
