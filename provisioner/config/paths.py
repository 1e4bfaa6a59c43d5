"""Where an instance's files are: its configuration folder, Nerve's state folder, and the
runtime's databases (SWEEP-1, SWEEP-2, NERVE-7).

Nerve keeps two folders apart. Its *configuration folder* (``config.yaml``,
``config.local.yaml``) is found by a lookup, first match wins: its ``-c``/``--config-dir``
flag, the ``NERVE_CONFIG_DIR`` variable, the current folder when it holds a configuration file,
then the folder named by its pointer file (``$NERVE_HOME/config_dir``) when that one holds
one. Its *state folder* is ``$NERVE_HOME`` (default ``~/.nerve``): ``nerve.db`` and
``memu.sqlite`` live there. The package finds both the same way (``find_folders``); where
Nerve falls back to the current folder, the package keeps its own documented default,
``~/.nerve``.

A *Nerve configuration is found* when the configuration folder holds one of Nerve's files and
the state folder holds Nerve's ``nerve.db``. Then the package's own state goes under the state
folder too (``memory/`` beside ``nerve.db``), the sweep reads ``nerve.db`` and the migration
reads ``memu.sqlite`` there by default. Otherwise (the package on its own) both databases stay
under the configuration folder, as before. Flags always win over either.

The sweep, the recall command and doctor all open the same files, so their names are written
once here. Only the standard library is used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

MEMORY_DIR = "memory"
TRANSCRIPTS_FILE = "transcripts.sqlite3"
STATE_FILE = "state.sqlite3"

CONFIG_DIR_ENV = "NERVE_CONFIG_DIR"  # NERVE-7: Nerve's variable for its configuration folder
NERVE_HOME_ENV = "NERVE_HOME"  # NERVE-7: Nerve's variable for its state folder
DEFAULT_NERVE_HOME = "~/.nerve"  # NERVE-7: Nerve's state folder by default
DEFAULT_CONFIG_DIR = "~/.nerve"  # the package's own default configuration folder
NERVE_CONFIG_FILES = ("config.yaml", "config.local.yaml")  # NERVE-7: what makes a folder one
POINTER_FILE = "config_dir"  # NERVE-7: under the state folder, names the configuration folder
NERVE_DB_FILE = "nerve.db"  # NERVE-7: Nerve's conversations, under the state folder
MEMU_DB_FILE = "memu.sqlite"  # NERVE-7: memU's store, under the state folder

# How the configuration folder was found (NERVE-7), as Nerve names its sources.
FROM_FLAG = "flag"
FROM_ENV = "env"
FROM_CWD = "cwd"
FROM_POINTER = "pointer"
FROM_DEFAULT = "default"


@dataclass(frozen=True)
class Folders:
    """An instance's folders: ``config_dir`` and how it was found (``source``), and Nerve's
    state folder ``state_dir``. ``nerve`` says whether a Nerve configuration was found."""

    config_dir: Path
    source: str
    state_dir: Path

    @property
    def nerve(self) -> bool:
        return has_config_files(self.config_dir) and (self.state_dir / NERVE_DB_FILE).is_file()

    @property
    def nerve_db(self) -> Path:
        """Nerve's ``nerve.db`` in its state folder."""
        return self.state_dir / NERVE_DB_FILE

    @property
    def memu_db(self) -> Path:
        """memU's store in Nerve's state folder."""
        return self.state_dir / MEMU_DB_FILE


def nerve_home(env: Mapping[str, str] | None = None) -> Path:
    """Nerve's state folder: ``$NERVE_HOME`` made absolute (from the current folder), else
    ``~/.nerve``."""
    env = os.environ if env is None else env
    raw = env.get(NERVE_HOME_ENV, "").strip()
    if raw:
        return Path(os.path.abspath(Path(raw).expanduser()))
    return Path(DEFAULT_NERVE_HOME).expanduser()


def has_config_files(folder: Path) -> bool:
    """Whether ``folder`` holds one of Nerve's configuration files (False when unreadable)."""
    try:
        return any((folder / name).exists() for name in NERVE_CONFIG_FILES)
    except OSError:
        return False


def find_folders(flag: Path | None = None, env: Mapping[str, str] | None = None) -> Folders:
    """The configuration folder by Nerve's lookup (``flag`` first), and the state folder."""
    env = os.environ if env is None else env
    state = nerve_home(env)
    if flag is not None:
        return Folders(flag.expanduser(), FROM_FLAG, state)
    named = env.get(CONFIG_DIR_ENV, "").strip()
    if named:
        return Folders(Path(named).expanduser(), FROM_ENV, state)
    try:
        here = Path.cwd()
    except OSError:  # the current folder was removed: nothing to find there
        here = None
    if here is not None and has_config_files(here):
        return Folders(here, FROM_CWD, state)
    pointed = _pointer(state)
    if pointed is not None and has_config_files(pointed):
        return Folders(pointed, FROM_POINTER, state)
    return Folders(Path(DEFAULT_CONFIG_DIR).expanduser(), FROM_DEFAULT, state)


def _pointer(state: Path) -> Path | None:
    """The folder Nerve's pointer file names, when it names one that exists."""
    try:
        text = (state / POINTER_FILE).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text:
        return None
    folder = Path(text)
    return folder if folder.is_dir() else None


def default_paths(config_dir: Path, env: Mapping[str, str] | None = None) -> tuple[Path, Path]:
    """The transcripts and state databases: under Nerve's state folder when ``config_dir`` is
    a Nerve configuration (NERVE-7), else under ``config_dir``."""
    folders = Folders(config_dir, FROM_FLAG, nerve_home(env))
    folder = (folders.state_dir if folders.nerve else config_dir) / MEMORY_DIR
    return folder / TRANSCRIPTS_FILE, folder / STATE_FILE


def found_nerve_db(config_dir: Path, env: Mapping[str, str] | None = None) -> Path | None:
    """Nerve's ``nerve.db`` when ``config_dir`` is a Nerve configuration (NERVE-7), else None:
    what ``memory sweep`` reads without ``--nerve-db`` or ``--transcripts``."""
    folders = Folders(config_dir, FROM_FLAG, nerve_home(env))
    return folders.nerve_db if folders.nerve else None


def found_memu_db(config_dir: Path, env: Mapping[str, str] | None = None) -> Path | None:
    """memU's store in Nerve's state folder when ``config_dir`` is a Nerve configuration
    (NERVE-7), else None: what ``memory migrate`` reads without ``--memu-db``."""
    folders = Folders(config_dir, FROM_FLAG, nerve_home(env))
    return folders.memu_db if folders.nerve else None
