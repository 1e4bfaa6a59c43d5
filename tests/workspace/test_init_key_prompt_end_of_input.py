"""Ctrl-D at init's hidden key prompt on a real terminal is one line and exit status 2, as at
any other question (INIT-1): nothing written, never a traceback."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import termios
from collections.abc import Callable
from pathlib import Path

from provisioner.backends import EMBEDDINGS_KEY_LABEL
from tests.support.processes import clean_environment
from tests.support.repo import REPO_ROOT

END_OF_INPUT = b"\x04"  # Ctrl-D at the start of a line: the terminal ends the input
WAIT_S = 60  # a guard on the command's exit once its input ended, far beyond what it takes


def _controlling_terminal() -> None:
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def read_until(leader: int, seen: bytearray, done: Callable[[bytes], bool]) -> None:
    """Read the terminal into ``seen`` until ``done(seen)``; fails, with what was seen, when the
    other side closes the terminal first (the command ended without asking)."""
    while not done(bytes(seen)):
        try:
            chunk = os.read(leader, 4096)  # blocks until the command writes or ends
        except OSError:  # EIO: every process on the other side closed it
            chunk = b""
        assert chunk, f"the command ended first: {seen.decode(errors='replace')}"
        seen += chunk


def test_ctrl_d_at_the_key_prompt_is_one_line_not_a_traceback(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    env = clean_environment(tmp_path / "home", {"PYTHONPATH": str(REPO_ROOT)})
    leader, follower = os.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "provisioner", "init", "--terminal", "--memory-backend", "memu",
         "--workspace", str(tmp_path / "ws"), "--config-dir", str(tmp_path / "cfg")],
        stdin=follower, stdout=follower, stderr=follower, env=env,
        preexec_fn=_controlling_terminal,
    )  # fmt: skip
    os.close(follower)
    seen = bytearray()
    key_prompt = f"{EMBEDDINGS_KEY_LABEL}: ".encode()
    try:
        answered = 0
        while True:  # each question with a default shown: take the default, until the key's
            read_until(
                leader, seen, lambda text, n=answered: key_prompt in text or text.count(b"]: ") > n
            )
            if key_prompt in seen:
                break
            os.write(leader, b"\n")
            answered += 1
        os.write(leader, END_OF_INPUT)
        assert process.wait(timeout=WAIT_S) == 2
        try:
            while chunk := os.read(leader, 4096):
                seen += chunk
        except OSError:  # the other side closed
            pass
    finally:
        os.close(leader)
        if process.poll() is None:
            process.kill()
    text = seen.decode(errors="replace")
    assert "Traceback" not in text, text
    tail = text[text.index(EMBEDDINGS_KEY_LABEL) :]
    assert f"error: input ended while asking: {EMBEDDINGS_KEY_LABEL}:" in tail, text
    assert not (tmp_path / "cfg" / "config.local.yaml").exists()
