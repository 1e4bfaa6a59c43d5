"""Built-in jobs under Loom: a shipped memU prompt runs in its Loom wording (TXT-7).

A workspace set up for memU keeps its ``config/cron/system.yaml`` when the instance moves to
Loom, and memU's maintenance prompt must not then prune memories through Loom's tools. So
while the backend is ``loom``, a built-in job whose prompt is still byte for byte a memU prompt
this package has shipped (in any version) runs with the Loom prompt instead. A prompt someone
edited is not shipped text and runs as written. The same holds for an old install that keeps
its built-in jobs in ``jobs.yaml`` and has no ``system.yaml``.

Every memU job prompt this package ships is recorded, per package version, in
``templates/shipped-memu-prompts.json`` (beside the templates it records, so a working copy of
the templates carries its own); ``nerve golden update --backend memu`` adds the current ones
and never removes an old one, and ``nerve golden check`` fails while a current one is missing.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from provisioner import __version__, assets
from provisioner.texts import JOB_PROMPTS, job_prompt

SHIPPED_PROMPTS_NAME = "shipped-memu-prompts.json"  # TXT-7: in templates/
SYSTEM_JOBS_FILE = "system.yaml"  # TXT-6: built-in jobs, written by nerve init
USER_JOBS_FILE = "jobs.yaml"  # the user's jobs; on old installs also the built-in ones


def shipped_prompts_file() -> Path:
    """Where the registry of shipped memU prompts is (beside ``copier.yml``)."""
    return assets.template_dir() / SHIPPED_PROMPTS_NAME


@cache
def shipped_memu_prompts() -> dict[str, dict[str, list[str]]]:
    """``{version: {job_id: [prompt, …]}}`` as recorded; empty when the file is missing."""
    try:
        return json.loads(shipped_prompts_file().read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}


def is_shipped_memu_prompt(job_id: str, prompt: str) -> bool:
    """True when ``prompt`` is exactly a memU prompt shipped for ``job_id`` in any version."""
    return any(prompt in jobs.get(job_id, ()) for jobs in shipped_memu_prompts().values())


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
    recorded = shipped_memu_prompts().get(__version__, {})
    return [
        job_id
        for job_id, prompt in current_memu_prompts().items()
        if prompt not in recorded.get(job_id, ())
    ]


def record_current_memu_prompts() -> bool:
    """Add this version's memU prompts to the registry; never removes one. True if written."""
    registry = {version: dict(jobs) for version, jobs in shipped_memu_prompts().items()}
    recorded = registry.setdefault(__version__, {})
    changed = False
    for job_id, prompt in current_memu_prompts().items():
        prompts = list(recorded.get(job_id, []))
        if prompt not in prompts:
            prompts.append(prompt)
            recorded[job_id] = prompts
            changed = True
    if changed:
        text = json.dumps(registry, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        shipped_prompts_file().write_text(text, encoding="utf-8")
        shipped_memu_prompts.cache_clear()
    return changed
