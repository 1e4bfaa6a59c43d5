"""Writes to the machine-local configuration file (``config.local.yaml``).

The only value init writes is memU's optional embeddings key (INIT-3). The file is read, the
one key set, and the result written through a temporary name, so a failure leaves the old file
whole. YAML comments in the file do not survive the rewrite; the summary says which file was
written.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from provisioner.config.bounded_yaml import YamlLimitError, load_bounded, read_small_text
from provisioner.errors import UserError
from provisioner.files import write_atomically

LOCAL_CONFIG_NAME = "config.local.yaml"  # CONF-1
EMBEDDINGS_KEY_PATH: tuple[str, ...] = ("openai_api_key",)  # INIT-3, NERVE-8: where Nerve reads it
SECRET_FILE_MODE = 0o600  # it holds a key: readable by its owner only


class LocalConfigError(UserError, ValueError):
    """The machine-local file exists but is not a YAML mapping, so it is left alone."""


def store_embeddings_key(config_dir: Path, key: str) -> Path:
    """Set memU's embeddings key in ``<config_dir>/config.local.yaml``; returns the path.

    The key goes where Nerve reads it: its top-level ``openai_api_key`` (NERVE-8), which
    Nerve hands to memU for embeddings."""
    path = Path(config_dir) / LOCAL_CONFIG_NAME
    try:
        text = read_small_text(path)
        loaded = load_bounded(text) if text is not None else None
    except (YamlLimitError, yaml.YAMLError, UnicodeDecodeError) as error:
        problem = " ".join(str(error).split())
        raise LocalConfigError(f"{path}: {problem}; the key was not stored") from None
    if loaded is not None and not isinstance(loaded, dict):
        raise LocalConfigError(f"{path}: top level is not a mapping; the key was not stored")
    document: dict = loaded or {}
    node = document
    for part in EMBEDDINGS_KEY_PATH[:-1]:
        child = node.get(part)
        if not isinstance(child, dict):
            child = {}
            node[part] = child
        node = child
    node[EMBEDDINGS_KEY_PATH[-1]] = key
    text = yaml.safe_dump(document, sort_keys=False)
    write_atomically(path, text.encode("utf-8"), SECRET_FILE_MODE)
    return path
