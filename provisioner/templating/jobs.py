"""Built-in jobs under Loom: a shipped memU prompt runs in its Loom wording (TXT-7).

A workspace set up for memU keeps its ``config/cron/system.yaml`` when the instance moves to
Loom, and memU's maintenance prompt must not then prune memories through Loom's tools. So
while the backend is ``loom``, a built-in job whose prompt is still byte for byte a memU prompt
that was shipped (by any version of this package, or by Nerve's own bootstrap) runs with the
Loom prompt instead. A prompt someone edited is not shipped text and runs as written. The same
holds for an old install that keeps its built-in jobs in ``jobs.yaml`` and has no
``system.yaml``.

The registry, ``templates/shipped-memu-prompts.json`` (beside the templates it records, so a
working copy of the templates carries its own), maps who shipped a prompt to, per job id, the
SHA-256 of each prompt's UTF-8 bytes: ``{shipper: {job_id: [hex digest, …]}}``. Digests, not
texts: Nerve's prompts are not this package's to copy. A shipper is a version of this package
(``"0.1.0"``) or ``NERVE_BOOTSTRAP``. ``nerve golden update --backend memu`` adds this version's
digests and never removes one; ``nerve golden check`` fails while a current one is missing.

Nerve's digests were derived from ``nerve/bootstrap.py`` of ClickHouse/nerve, whose
``CORE_CRONS`` and ``PRODUCTIVITY_CRONS`` hold the prompts and whose ``_write_cron_jobs``
writes them to ``system.yaml`` with ``yaml.safe_dump``: each prompt literal, read with
``ast.literal_eval`` from every commit of that file, was dumped and loaded back as that
function writes it (the loaded string is the one a job runs with), and its UTF-8 bytes hashed.
Every commit from the one that introduced the jobs to the newest held the same two prompts;
docs/cron.md gives the steps to repeat it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from provisioner import __version__
from provisioner.templating.folder import active_folder
from provisioner.templating.texts import JOB_PROMPTS, job_prompt

NERVE_BOOTSTRAP = "nerve bootstrap.py"  # TXT-7: the shipper key of Nerve's own prompts
SYSTEM_JOBS_FILE = "system.yaml"  # TXT-6: built-in jobs, written by nerve init
USER_JOBS_FILE = "jobs.yaml"  # the user's jobs; on old installs also the built-in ones
Registry = dict[str, dict[str, list[str]]]


def prompt_digest(prompt: str) -> str:
    """The registry's key for a prompt: SHA-256 of its UTF-8 bytes, lowercase hex."""
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def shipped_prompts_file() -> Path:
    """Where the registry of shipped memU prompts is (beside ``copier.yml``)."""
    return active_folder().shipped_prompts_file


def shipped_memu_digests() -> Registry:
    """``{shipper: {job_id: [sha256, …]}}`` as recorded; empty when the file is missing."""
    return active_folder().shipped_memu_prompts


def is_shipped_memu_prompt(job_id: str, prompt: str) -> bool:
    """True when ``prompt`` is exactly a memU prompt shipped for ``job_id`` by anyone."""
    digest = prompt_digest(prompt)
    return any(digest in jobs.get(job_id, ()) for jobs in shipped_memu_digests().values())


def effective_job_prompt(job_id: str, prompt: str, backend: str) -> str:
    """The prompt a job runs with under ``backend`` (TXT-7): the one function the loader uses."""
    if backend == "memu" or job_id not in JOB_PROMPTS:
        return prompt
    if is_shipped_memu_prompt(job_id, prompt):
        return job_prompt(job_id, backend)
    return prompt


def reword_jobs(document: Mapping[str, Any], backend: str) -> dict[str, Any]:
    """A copy of a parsed cron file with every job's prompt made effective for ``backend``."""
    reworded = dict(document)
    jobs = []
    for job in document.get("jobs") or []:
        if isinstance(job, Mapping) and isinstance(job.get("prompt"), str):
            job = {
                **job,
                "prompt": effective_job_prompt(str(job.get("id")), job["prompt"], backend),
            }
        jobs.append(job)
    reworded["jobs"] = jobs
    return reworded


def load_cron_jobs(cron_dir: Path, backend: str) -> list[dict[str, Any]]:
    """The jobs of ``system.yaml`` and ``jobs.yaml`` merged, with effective prompts.

    A job id in ``jobs.yaml`` replaces the built-in one; with no ``system.yaml`` (an old
    install) every job comes from ``jobs.yaml``. Raises ``yaml.YAMLError`` for a file that is
    not YAML and ``ValueError`` for one that is not a mapping with a ``jobs`` list, or for a
    job without an ``id`` (nothing is dropped silently).
    """
    merged: dict[str, dict[str, Any]] = {}
    for name in (SYSTEM_JOBS_FILE, USER_JOBS_FILE):
        path = cron_dir / name
        if not path.is_file():
            continue
        document = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if not isinstance(document, Mapping) or not isinstance(document.get("jobs", []), list):
            raise ValueError(f"{path}: expected a mapping with a 'jobs' list")
        for index, job in enumerate(reword_jobs(document, backend)["jobs"]):
            if not isinstance(job, Mapping) or "id" not in job:
                raise ValueError(f"{path}: jobs[{index}]: expected a mapping with an 'id'")
            merged[str(job["id"])] = dict(job)
    return list(merged.values())


def current_memu_prompts() -> dict[str, str]:
    """The memU prompts this version renders, by job id."""
    return {job_id: job_prompt(job_id, "memu") for job_id in JOB_PROMPTS}


def unrecorded_memu_prompts() -> list[str]:
    """Job ids whose current memU prompt is not recorded for this version yet."""
    recorded = shipped_memu_digests().get(__version__, {})
    return [
        job_id
        for job_id, prompt in current_memu_prompts().items()
        if prompt_digest(prompt) not in recorded.get(job_id, ())
    ]


def record_current_memu_prompts() -> bool:
    """Add this version's memU prompt digests to the registry; never removes one.

    True if the file was written.
    """
    registry = {shipper: dict(jobs) for shipper, jobs in shipped_memu_digests().items()}
    recorded = registry.setdefault(__version__, {})
    changed = False
    for job_id, prompt in current_memu_prompts().items():
        digests = list(recorded.get(job_id, []))
        if prompt_digest(prompt) not in digests:
            digests.append(prompt_digest(prompt))
            recorded[job_id] = digests
            changed = True
    if changed:
        text = json.dumps(registry, indent=2, sort_keys=True) + "\n"
        shipped_prompts_file().write_text(text, encoding="utf-8")
        active_folder().forget_shipped_memu_prompts()
    return changed
