"""Every command's ``--help`` opens with a sentence, through the real CLI (issue 18, point 10).

A person who types ``nerve memory sweep --help`` should read what the command does before the
list of options; argparse shows nothing there unless a description is given, so the parser
makes one of each subcommand's one-line help when no description was written.
"""

from __future__ import annotations

import argparse

import pytest

from provisioner.cli.common import as_sentence
from provisioner.cli.main import build_parser
from tests.support.processes import RunNerve


def _subcommands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield (*path, name)
                yield from _subcommands(sub, (*path, name))


COMMANDS = sorted(_subcommands(build_parser()))  # every command in full


def _opening(help_text: str) -> str:
    """The first paragraph after the usage lines."""
    paragraphs = [part.strip() for part in help_text.split("\n\n") if part.strip()]
    assert paragraphs[0].startswith("usage:"), help_text
    return paragraphs[1]


def test_every_command_group_is_seen() -> None:
    """The walk finds nested commands too, so the test below cannot pass by seeing none."""
    assert ("memory", "sweep") in COMMANDS
    assert ("golden", "check") in COMMANDS
    assert ("dev", "gateway") in COMMANDS
    assert len(COMMANDS) >= 14


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_opens_with_a_sentence(command: tuple[str, ...], run_nerve: RunNerve) -> None:
    result = run_nerve(*command, "--help")
    assert result.returncode == 0, result.stderr
    opening = _opening(result.stdout)
    assert opening[0].isupper() and opening.endswith((".", "!", "?")), (command, opening)


@pytest.mark.parametrize(
    ("summary", "sentence"),
    [
        ("provision a workspace", "Provision a workspace."),
        ("Serve the page.", "Serve the page."),
        ("  check golden/  ", "Check golden/."),
        ("is it there?", "Is it there?"),
    ],
)
def test_a_help_line_becomes_a_sentence(summary: str, sentence: str) -> None:
    assert as_sentence(summary) == sentence
