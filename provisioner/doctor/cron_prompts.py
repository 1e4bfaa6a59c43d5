"""The prompts of the workspace's cron jobs, as doctor's wording lint reads them (OPS-2, TXT-7).

A job's prompt is put before an agent as a prompt file is, so the wording lint reads the two
job files too. It reads only what an agent is shown, though: the prompts. And while the
backend is Loom, a built-in job whose prompt is still a shipped memU prompt runs in its Loom
wording (``provisioner.templating.jobs.effective_job_prompt``, the loader's own function), so
linting that memU text would warn about words no session sees.

``prompt_view`` keeps the text of every prompt that runs as written and blanks the rest of the
file (keys, comments, descriptions, the prompts the loader replaces), keeping each line break
where it was, so a place the lint finds has the file's own line number. The files are the
agent's to edit: the YAML's cost is checked before it is composed (``config.bounded_yaml``),
and a file that is not YAML, or not a mapping whose ``jobs`` is a list, gives None.
"""

from __future__ import annotations

import yaml

from provisioner.config.bounded_yaml import YamlLimitError, check_cost
from provisioner.templating.jobs import SYSTEM_JOBS_FILE, USER_JOBS_FILE, effective_job_prompt

CRON_FOLDER = "config/cron"  # TXT-6: where a workspace keeps its jobs (docs/cron.md)
CRON_FILES = (SYSTEM_JOBS_FILE, USER_JOBS_FILE)
NOT_A_JOBS_FILE = "not YAML with a jobs list"
_STRING_TAG = "tag:yaml.org,2002:str"
_LINE_BREAKS = "\r\n"


def prompt_view(text: str, backend: str) -> str | None:
    """``text`` with only the prompts that run as written under ``backend`` left in place.

    Every other character becomes a space, except line breaks, so offsets and line numbers
    stay the file's. None when the text is not a jobs file (see the module's docstring).
    """
    try:
        check_cost(text)
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, YamlLimitError):
        return None
    if root is None:
        return _blanked(text, [])
    if not isinstance(root, yaml.MappingNode):
        return None
    jobs = _value_of(root, "jobs")
    if jobs is None:
        return _blanked(text, [])
    if not isinstance(jobs, yaml.SequenceNode):
        return None
    kept: list[tuple[int, int]] = []
    for job in jobs.value:
        if not isinstance(job, yaml.MappingNode):
            continue
        prompt, job_id = _value_of(job, "prompt"), _value_of(job, "id")
        if not isinstance(prompt, yaml.ScalarNode) or prompt.tag != _STRING_TAG:
            continue
        identity = job_id.value if isinstance(job_id, yaml.ScalarNode) else ""
        if effective_job_prompt(str(identity), prompt.value, backend) == prompt.value:
            kept.append((prompt.start_mark.index, prompt.end_mark.index))
    return _blanked(text, kept)


def _value_of(mapping: yaml.MappingNode, key: str) -> yaml.Node | None:
    """The value node of ``key`` in ``mapping`` (its last, as a loader keeps), or None."""
    found = None
    for key_node, value_node in mapping.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            found = value_node
    return found


def _blanked(text: str, kept: list[tuple[int, int]]) -> str:
    """``text`` with every character outside ``kept`` spans a space, line breaks left."""
    characters = [char if char in _LINE_BREAKS else " " for char in text]
    for start, end in kept:
        characters[start:end] = text[start:end]
    return "".join(characters)
