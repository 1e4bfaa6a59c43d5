"""Reading the numbers a documentation page states, and the constants it ties them to.

A page ties a number to the constant that sets it with a reference-style link whose label is
the constant's name and whose target is the module defining it, so a reader can click the
number to see where it is set:

    a batch of at most [100 messages][WAITING_MAX_MESSAGES] …

    [WAITING_MAX_MESSAGES]: ../provisioner/runtime/budget.py

``tagged_numbers`` finds every such number; ``untagged_numbers`` finds the numbers with a unit
(``15 s``, ``128 KiB``, ``100 messages``, ``ten batches``) that a page states in prose
without a tag. Fenced code blocks and inline code are not prose: they show commands and
output, not claims.
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

from tests.support.repo import REPO_ROOT

NUMBER_WORDS = {
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
}
# What one of a unit is, in the constants' own units: seconds, bytes, or a count.
UNIT_SCALE = {
    "ms": 0.001,
    "s": 1,
    "second": 1,
    "seconds": 1,
    "min": 60,
    "minute": 60,
    "minutes": 60,
    "bytes": 1,
    "KiB": 1024,
    "MiB": 1024 * 1024,
}
COUNT_UNITS = ("messages", "characters", "batches", "sweeps", "times", "calls")

_NUMBER = r"\d{1,3}(?:[ ,]\d{3})+|\d+(?:\.\d+)?|" + "|".join(NUMBER_WORDS)
_UNIT = "|".join(sorted([*UNIT_SCALE, *COUNT_UNITS], key=len, reverse=True))
VALUE = re.compile(rf"(?P<number>{_NUMBER})(?:\s*(?P<unit>{_UNIT}))?")
TAG = re.compile(r"\[(?P<text>[^\[\]\n]+)\]\[(?P<name>[A-Z][A-Z0-9_]*)\]")
DEFINITION = re.compile(r"^\[(?P<name>[A-Z][A-Z0-9_]*)\]:\s*(?P<target>\S+)\s*$", re.MULTILINE)
FENCED = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
INLINE_CODE = re.compile(r"`[^`\n]*`")
# A number with a unit, standing on its own (not part of 2026-12-01 or v1.2); a count may have
# one word between (``ten good batches``).
_COUNT = "|".join(COUNT_UNITS)
STATED = re.compile(rf"(?<![\w.\-/])(?P<value>(?:{_NUMBER})\s+(?:{_UNIT}|[a-z]+\s+(?:{_COUNT})))\b")


@dataclass(frozen=True)
class TaggedNumber:
    """One number a page ties to a constant: ``[text][NAME]`` with ``[NAME]: path``."""

    page: str
    text: str
    name: str
    module: str

    def stated(self) -> float:
        """The number as the page states it, in seconds, bytes or a plain count."""
        return stated_value(self.text)

    def actual(self) -> float:
        """The constant's value, read from its module."""
        return float(getattr(importlib.import_module(self.module), self.name))


def stated_value(text: str) -> float:
    """``15 s`` → 15, ``5 min`` → 300, ``128 KiB`` → 131072, ``ten`` → 10, ``100 000`` → 1e5."""
    match = VALUE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a number with an optional unit")
    number = match["number"]
    word = NUMBER_WORDS.get(number)
    amount = float(word) if word is not None else float(re.sub(r"[ ,]", "", number))
    return amount * UNIT_SCALE.get(match["unit"] or "", 1)


def module_of(page: Path, target: str) -> str:
    """The module a link target names (``../provisioner/runtime/budget.py``), dotted."""
    path = (page.parent / target).resolve()
    relative = path.relative_to(REPO_ROOT)
    if relative.suffix != ".py" or relative.parts[0] != "provisioner" or not path.is_file():
        raise ValueError(f"{page.name}: {target} is not a module of the package")
    return ".".join(relative.with_suffix("").parts)


def tagged_numbers(page: Path) -> list[TaggedNumber]:
    """Every number ``page`` ties to a constant; a tag without its definition is an error."""
    text = page.read_text(encoding="utf-8")
    targets = {m["name"]: m["target"] for m in DEFINITION.finditer(text)}
    found = []
    for match in TAG.finditer(FENCED.sub("", text)):
        name = match["name"]
        if name not in targets:
            raise ValueError(f"{page.name}: [{match['text']}][{name}] has no [{name}]: line")
        found.append(TaggedNumber(page.name, match["text"], name, module_of(page, targets[name])))
    return found


def prose(text: str) -> str:
    """``text`` without code blocks, inline code, tagged numbers and link definitions."""
    for pattern in (FENCED, DEFINITION, TAG, INLINE_CODE):
        text = pattern.sub(" ", text)
    return text


def untagged_numbers(text: str) -> list[str]:
    """The numbers with a unit that ``text`` states in prose without tying them to a constant."""
    return [match["value"] for match in STATED.finditer(prose(text))]
