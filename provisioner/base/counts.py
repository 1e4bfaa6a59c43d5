"""A count and its noun, in the number the count asks for: "1 message", "3 messages".

Every line the package prints for a person counts something; "1 sessions" or "problem(s)"
reads as careless and makes a reader doubt the count itself. One function, so every command
says it the same way. English only: the nouns the package counts are regular, or name their
plural ("batch", "batches").
"""

from __future__ import annotations

IRREGULAR_PLURALS = {
    "batch": "batches",
    "entry": "entries",
    "directory": "directories",
    "memory": "memories",
    "summary": "summaries",
}


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``number`` and ``noun``, plural unless ``number`` is exactly 1 ("0 files", "1 file")."""
    if number == 1:
        return f"{number} {noun}"
    return f"{number} {plural or IRREGULAR_PLURALS.get(noun, noun + 's')}"
