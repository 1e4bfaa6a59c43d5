"""The package's router inside Nerve's own FastAPI app, behind Nerve's own auth (NERVE-4).

Nerve's ``create_app`` builds the app; its ``require_auth`` guards the router; the app runs in
process (its lifespan, which starts Nerve's daemon parts, is not entered).
"""

from __future__ import annotations

import pytest

from tests.nerve_host.machine import NO_NERVE, Machine

nerve_server = pytest.importorskip("nerve.gateway.server", reason=NO_NERVE)

import yaml  # noqa: E402
from fastapi import Depends  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from nerve import config as nerve_config  # noqa: E402
from nerve.gateway import auth as nerve_auth  # noqa: E402

from provisioner.config.loader import load_config  # noqa: E402
from provisioner.web import fastapi_router  # noqa: E402

SECRET = "a-test-secret-that-is-long-enough-for-hs256"
BACKEND_ROUTE = "/api/memory/backend"
MEMU_EDIT = "/api/memory/memu/items"


@pytest.fixture
def app_client(machine: Machine) -> TestClient:
    """Nerve's app under Loom with a JWT secret, the package's router included before its own
    routes, guarded by Nerve's ``require_auth``."""
    (machine.config_dir / "config.yaml").write_text(
        yaml.safe_dump(
            {
                "workspace": str(machine.workspace),
                "auth": {"jwt_secret": SECRET},
                "memory": {"backend": "loom", "loom": {"namespace": "home"}},
            }
        ),
        encoding="utf-8",
    )
    nerve_config.set_config(nerve_config.load_config(machine.config_dir))
    app = nerve_server.create_app()
    router = fastapi_router(
        load_config(machine.config_dir, machine.workspace),
        dependencies=[Depends(nerve_auth.require_auth)],
    )
    app.router.routes[:0] = router.routes
    return TestClient(app)


class TestInsideNervesApp:
    def test_a_request_without_nerves_token_is_refused_by_nerves_auth(
        self, app_client: TestClient
    ) -> None:
        assert app_client.get(BACKEND_ROUTE).status_code == 401

    def test_with_nerves_token_the_card_names_loom(self, app_client: TestClient) -> None:
        token = nerve_auth.create_token(SECRET)
        answer = app_client.get(BACKEND_ROUTE, headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 200
        assert answer.json()["backend"] == "loom"

    def test_under_loom_memus_edit_routes_answer_409_behind_auth(
        self, app_client: TestClient
    ) -> None:
        token = nerve_auth.create_token(SECRET)
        assert app_client.delete(MEMU_EDIT).status_code == 401
        answer = app_client.delete(MEMU_EDIT, headers={"Authorization": f"Bearer {token}"})
        assert answer.status_code == 409
