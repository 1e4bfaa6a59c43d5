"""The adoption patch, end to end, on Nerve with ``patches/nerve-adoption.patch`` applied
(NERVE-13…NERVE-18).

Everything here is Nerve's own code as patched: its ``nerve`` command (run as a process, with no
mounting script of the package's — the patch mounts the package), its ``Database``, its
``AgentEngine`` and its session path (stopped where the Claude SDK would start its CLI), its
``run_memorization_sweep`` (what its memorization loop and its sweep route call), its FastAPI
app behind its auth, its cron loader, its doctor and its key check. The dev gateway stands in
for the platform's. Against an unpatched Nerve the module skips at once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.nerve_host.machine import NO_NERVE, Machine, RunHost, nerve_is_patched

nerve_engine = pytest.importorskip("nerve.agent.engine", reason=NO_NERVE)
if not nerve_is_patched():
    pytest.skip("Nerve is not patched (patches/nerve-adoption.patch)", allow_module_level=True)

from fastapi.testclient import TestClient  # noqa: E402
from nerve import config as nerve_config  # noqa: E402
from nerve import db as nerve_db  # noqa: E402
from nerve.agent.backends import claude as claude_backend  # noqa: E402
from nerve.cron.service import CronService  # noqa: E402
from nerve.external_agents.registry import FileTarget  # noqa: E402
from nerve.external_agents.renderers.claude_code import ClaudeCodeRenderer  # noqa: E402
from nerve.external_agents.renderers.codex_global import CodexGlobalRenderer  # noqa: E402
from nerve.gateway import auth as nerve_auth  # noqa: E402
from nerve.gateway import server as nerve_server  # noqa: E402
from nerve.gateway.routes import _deps as route_deps  # noqa: E402

from provisioner.backends import MEMU_TOOLS  # noqa: E402
from provisioner.devgateway import serve_in_thread  # noqa: E402

pytestmark = pytest.mark.anyio
NAMESPACE = "ada"
SECRET = "a-test-secret-that-is-long-enough-for-hs256"
BUNDLE_TARGET = FileTarget(output=Path("bundle.md"), includes=["SOUL.md"], style="global")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class StoppedBeforeTheSDK(Exception):
    """Raised where the Claude SDK would start its CLI; carries what the session was given."""

    def __init__(self, options: Any) -> None:
        super().__init__("stopped before the SDK starts")
        self.options = options


def switch_to_loom(machine: Machine, gateway_url: str) -> None:
    """The switch as docs/setup.md writes it: the backend, Loom's namespace and the gateway."""
    local = machine.config_dir / "config.local.yaml"
    data = yaml.safe_load(local.read_text(encoding="utf-8")) if local.exists() else {}
    data = data or {}
    data["memory"] = {
        **(data.get("memory") or {}),
        "backend": "loom",
        "loom": {"namespace": NAMESPACE},
    }
    data["mcp_gateway_url"] = gateway_url
    data.setdefault("auth", {})["jwt_secret"] = SECRET
    local.write_text(yaml.safe_dump(data), encoding="utf-8")


async def write_conversation(path: Path) -> int:
    database = nerve_db.Database(path)
    await database.connect()
    try:
        await database.create_session("chat")
        await database.add_message("chat", "user", "I take my tea with lemon.")
        return await database.add_message("chat", "assistant", "Noted: tea with lemon.")
    finally:
        await database.close()


def new_session_options(engine: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    """The options Nerve's real session path builds for a new web session."""

    async def stop(self: Any) -> None:
        raise StoppedBeforeTheSDK(self._options)

    monkeypatch.setattr(claude_backend.ClaudeClient, "connect", stop)
    return stop


class TestAPatchedNerveOnLoom:
    async def test_init_sweep_session_web_doctor_and_config_on_the_patched_nerve(
        self, machine: Machine, run_host: RunHost, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        done = run_host(
            "-c",
            str(machine.config_dir),
            "init",
            "--memory-backend",
            "loom",
            "--non-interactive",
            mounted=False,  # the patched nerve mounts the package itself
        )
        assert done.returncode == 0, done.stderr
        agents = (machine.workspace / "AGENTS.md").read_text(encoding="utf-8")
        assert "mcp__loom__" in agents and "mcp__nerve__memorize" not in agents
        last_id = await write_conversation(machine.state / "nerve.db")

        with serve_in_thread(seed=3) as gateway:
            switch_to_loom(machine, gateway.base_url)
            monkeypatch.setenv("NERVE_CONFIG_DIR", str(machine.config_dir))
            config = nerve_config.load_config(machine.config_dir)
            nerve_config.set_config(config)
            database = nerve_db.Database(machine.state / "nerve.db")
            await database.connect()
            engine = nerve_engine.AgentEngine(config, database)
            try:
                await engine.initialize()
                assert engine.memory.active and engine._memory_bridge is None  # memU never runs
                for tool in MEMU_TOOLS:
                    assert tool not in engine.registry

                # Nerve's memorization loop and its sweep route both call this: Loom's sweep.
                stats = await engine.run_memorization_sweep()
                assert stats["backend"] == "loom" and stats["messages_indexed"] == 2, stats
                assert engine.memory.loom.state.watermark("chat") == last_id
                assert "I take my tea with lemon." in gateway.app.store.memory_texts(NAMESPACE)
                # the state is the one the package's command line reads
                status = run_host("memory", "status", "--json", mounted=False)
                assert status.returncode == 0, status.stderr
                gateway.app.store.remember("prefers short answers", namespace=NAMESPACE)

                # A new session, built by Nerve's real path and stopped before the SDK.
                new_session_options(engine, monkeypatch)
                with pytest.raises(StoppedBeforeTheSDK) as stopped:
                    await engine._get_or_create_client("next", "web", None)
                options = stopped.value.options
                servers = options.mcp_servers
                assert servers["loom"] == {
                    "type": "http",
                    "url": f"{gateway.base_url}/s/loom/mcp",
                }
                prompt = Path(options.system_prompt["path"]).read_text(encoding="utf-8")
                assert "## Memory" in prompt and "mcp__loom__loom_search" in prompt
                assert "# Recalled Memories" in prompt and "prefers short answers" in prompt
                for tool in MEMU_TOOLS:
                    assert f"mcp__nerve__{tool}`" not in prompt
                catalog_tools = set(engine.memory.loom.catalog_server().tools)
                section = prompt[prompt.rindex("## Memory") :]  # the section is the authority
                named = {word for word in section.split("`") if word.startswith("mcp__loom__")}
                assert named <= {f"mcp__loom__{tool}" for tool in catalog_tools}

                # Nerve's web app: the card behind Nerve's auth, the sweep route on Loom.
                monkeypatch.setattr(nerve_server, "_engine", engine)
                route_deps.init_deps(engine, database)
                client = TestClient(nerve_server.create_app())
                assert client.get("/api/memory/backend").status_code == 401
                token = nerve_auth.create_token(SECRET)
                headers = {"Authorization": f"Bearer {token}"}
                card = client.get("/api/memory/backend", headers=headers)
                assert card.status_code == 200 and card.json()["backend"] == "loom"
                swept = client.post("/api/memorization/sweep", headers=headers)
                assert swept.status_code == 200 and swept.json()["backend"] == "loom"

                # The bundles Nerve writes for external agents send them to Loom.
                for renderer in (CodexGlobalRenderer(), ClaudeCodeRenderer()):
                    bundle = renderer.render(BUNDLE_TARGET, workspace=machine.workspace)
                    assert "mcp__loom__" in bundle and "session_context(" not in bundle
                    assert "`memorize`" not in bundle and "memory_recall" not in bundle

                # Nerve's cron loader: a shipped memU prompt runs in Loom's wording.
                jobs = CronService(config, engine, database)._load_merged_jobs()
                prompts = " ".join(job.prompt for job in jobs)
                assert "mcp__nerve__memory_delete" not in prompts
            finally:
                await engine.shutdown()
                await database.close()

            doctor = run_host("-c", str(machine.config_dir), "doctor", mounted=False)
            assert "memory:" in doctor.stdout, doctor.stdout + doctor.stderr
            assert "unknown key" not in doctor.stdout
        refused = run_host(
            "-c",
            str(machine.config_dir),
            "migrate-openclaw",
            "--sessions-dir",
            str(machine.home),
            mounted=False,
        )
        assert refused.returncode != 0
        assert "memU does not run" in refused.stderr and "Traceback" not in refused.stderr
        validated = run_host(
            "-c", str(machine.config_dir), "config", "validate", "--strict-keys", mounted=False
        )
        assert validated.returncode == 0, validated.stdout + validated.stderr
