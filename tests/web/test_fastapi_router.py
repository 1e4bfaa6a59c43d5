"""``provisioner.web.fastapi_router`` inside a FastAPI app shaped like Nerve's (NERVE-4, DOC-3).

The app (``nerve_shaped_app.py``) has Nerve's shape: an auth dependency on every API route,
its own memU read and edit routes, other memory and diagnostics routes, middleware, and the
single-page-app catch-all last. The router is included where Nerve's documentation line puts
it, before Nerve's REST routes, with Nerve's auth dependency, and driven through Starlette's
TestClient (in-process HTTP, the app's lifespan run).
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fastapi import APIRouter, Depends
from fastapi.routing import APIRoute
from starlette.applications import Starlette
from starlette.testclient import TestClient

from provisioner.config.loader import Config
from provisioner.web import fastapi_router, memory_router
from tests.web.nerve_shaped_app import (
    AUTH,
    NERVE_MEMU_EDITS,
    NERVE_OTHER_REQUESTS,
    SPA_MARKER,
    TOKEN,
    NerveShaped,
    nerve_shaped_app,
    require_token,
)
from tests.web.serving import DiagnosticsSnapshot
from tests.web.test_memory_routes import LOOM, loom_config
from tests.web.test_response_safety import (
    HOSTILE_DASHBOARD,
    HOSTILE_MESSAGE,
    assert_security_headers,
)

MEMU = "memory:\n  backend: memu\n"
GUARDED = [Depends(require_token)]


def router_for(config: Config, memory: Any = None) -> APIRouter:
    """The router as Nerve builds it: with its auth dependency on every route."""
    return fastapi_router(config, memory=memory, dependencies=GUARDED)


@pytest.fixture
def client() -> Iterator[Callable[[NerveShaped], TestClient]]:
    """``client(shaped)``: a TestClient on the app, its lifespan started and stopped."""
    clients: list[TestClient] = []

    def start(shaped: NerveShaped) -> TestClient:
        test_client = TestClient(shaped.app)
        test_client.__enter__()
        clients.append(test_client)
        return test_client

    yield start
    for test_client in clients:
        test_client.__exit__(None, None, None)


def send(client: TestClient, method: str, path: str, body: Any = None, headers: Any = None) -> Any:
    return client.request(method, path, json=body, headers=headers or {})


def concrete(path: str) -> str:
    """A request path for a route path: each parameter given a plain value."""
    return path.replace("{rest:path}", "items/item-1")


def requests_of(router: APIRouter) -> list[tuple[str, str]]:
    """(method, path) for every method of every route the router added."""
    return sorted(
        (method, concrete(route.path))
        for route in router.routes
        if isinstance(route, APIRoute)
        for method in route.methods or ()
    )


class TestEveryRouteCarriesTheDependencies:
    @pytest.mark.parametrize("backend", [MEMU, LOOM], ids=["memu", "loom"])
    def test_every_route_added_lists_the_given_dependencies(self, configure, backend: str) -> None:
        """NERVE-4: the dependencies are on each route, not only on some of them."""
        router = router_for(configure(backend))
        routes = [route for route in router.routes if isinstance(route, APIRoute)]
        assert routes and len(routes) == len(router.routes)
        for route in routes:
            assert [dep.dependency for dep in route.dependencies] == [require_token], route.path

    @pytest.mark.parametrize("backend", [MEMU, LOOM], ids=["memu", "loom"])
    def test_without_a_token_every_route_of_the_router_answers_nerve_s_401(
        self, configure, client, backend: str
    ) -> None:
        """NERVE-4: no answer of the router, a 409 included, reaches someone not signed in."""
        router = router_for(configure(backend))
        app = client(nerve_shaped_app(before_nerve=[router]))
        for method, path in requests_of(router):
            answer = send(app, method, path, {"content": "x"})
            assert answer.status_code == 401, (method, path, answer.text)
            assert answer.json() == {"detail": "Not authenticated"}

    def test_a_wrong_token_is_refused_by_the_dependency_too(self, configure, client) -> None:
        app = client(nerve_shaped_app(before_nerve=[router_for(configure(LOOM))]))
        answer = app.get("/api/memory/backend", headers={"Authorization": "Bearer nope"})
        assert answer.status_code == 401
        assert answer.json() == {"detail": "Invalid token"}

    def test_with_the_token_as_nerve_s_cookie_the_card_answers(self, configure, client) -> None:
        app = client(nerve_shaped_app(before_nerve=[router_for(configure(LOOM))]))
        app.cookies.set("nerve_token", TOKEN)
        answer = app.get("/api/memory/backend")
        assert answer.status_code == 200
        assert answer.json()["backend"] == "loom"

    def test_without_dependencies_the_routes_answer_anyone(self, configure, client) -> None:
        """The default adds none: auth is the including app's to give."""
        router = fastapi_router(configure(LOOM))
        app = client(nerve_shaped_app(before_nerve=[router]))
        assert app.get("/api/memory/backend").status_code == 200


class TestUnderLoom:
    @pytest.mark.parametrize(("method", "path", "body"), NERVE_MEMU_EDITS)
    def test_nerve_s_memu_edits_answer_409_and_never_reach_nerve_s_handler(
        self, configure, client, method: str, path: str, body: Any
    ) -> None:
        """NERVE-4, DOC-3: included before Nerve's routes, each memU edit is refused."""
        shaped = nerve_shaped_app(before_nerve=[router_for(configure(LOOM))])
        answer = send(client(shaped), method, path, body, AUTH)
        assert answer.status_code == 409
        reason = answer.json()["error"]
        assert "\n" not in reason
        assert reason.startswith("memory is kept in Loom")
        assert_security_headers(answer)
        assert shaped.served == []

    def test_an_edit_with_a_body_nerve_would_reject_is_still_a_409(self, configure, client) -> None:
        """The refusal comes before Nerve's body check: what is refused is the edit itself."""
        shaped = nerve_shaped_app(before_nerve=[router_for(configure(LOOM))])
        answer = send(client(shaped), "POST", "/api/memory/memu/categories", {"x": 1}, AUTH)
        assert answer.status_code == 409

    @pytest.mark.parametrize(
        "path", ["/api/memory/memu", "/api/memory/memu/audit", "/api/memory/memu/health"]
    )
    def test_nerve_s_memu_reads_still_reach_nerve(self, configure, client, path: str) -> None:
        """Only edits are refused: Nerve's reads of the store answer as Nerve's."""
        shaped = nerve_shaped_app(before_nerve=[router_for(configure(LOOM))])
        answer = client(shaped).get(path, headers=AUTH)
        assert answer.status_code == 200
        assert shaped.served == [("GET", path)]

    def test_included_after_nerve_s_routes_the_edits_reach_nerve_instead(
        self, configure, client
    ) -> None:
        """Why the documented line includes the router first: the first matching route wins."""
        shaped = nerve_shaped_app(after_nerve=[router_for(configure(LOOM))])
        method, path, body = NERVE_MEMU_EDITS[0]
        answer = send(client(shaped), method, path, body, AUTH)
        assert answer.status_code == 200
        assert shaped.served == [(method, path)]


class TestUnderMemu:
    def test_no_route_is_added_on_nerve_s_memu_paths(self, configure) -> None:
        """NERVE-4: under memU the router holds the card's two JSON routes and nothing else."""
        router = router_for(configure(MEMU))
        assert requests_of(router) == [
            ("GET", "/api/diagnostics/memory"),
            ("GET", "/api/memory/backend"),
        ]

    @pytest.mark.parametrize(("method", "path", "body"), NERVE_MEMU_EDITS + NERVE_OTHER_REQUESTS)
    def test_every_request_to_nerve_s_routes_is_answered_as_without_the_router(
        self, configure, client, method: str, path: str, body: Any
    ) -> None:
        """NERVE-4: the router shadows nothing of Nerve's: same status, body and handler."""
        plain = nerve_shaped_app()
        with_router = nerve_shaped_app(before_nerve=[router_for(configure(MEMU))])
        expected = send(client(plain), method, path, body, AUTH)
        answer = send(client(with_router), method, path, body, AUTH)
        assert (answer.status_code, answer.content) == (expected.status_code, expected.content)
        assert with_router.served == plain.served

    @pytest.mark.parametrize(("method", "path", "body"), NERVE_MEMU_EDITS)
    def test_nerve_s_memu_edits_are_served_by_nerve(
        self, configure, client, method: str, path: str, body: Any
    ) -> None:
        shaped = nerve_shaped_app(before_nerve=[router_for(configure(MEMU))])
        answer = send(client(shaped), method, path, body, AUTH)
        assert answer.status_code == 200
        assert shaped.served == [(method, path)]


class TestNoPageOverNerveSWebUi:
    @pytest.mark.parametrize("backend", [MEMU, LOOM], ids=["memu", "loom"])
    def test_memory_is_nerve_s_single_page_app(self, configure, client, backend: str) -> None:
        """NERVE-4: ``/memory`` is the web UI's page, not the standalone one."""
        router = router_for(configure(backend))
        assert "/memory" not in {
            route.path for route in router.routes if isinstance(route, APIRoute)
        }
        answer = client(nerve_shaped_app(before_nerve=[router])).get("/memory", headers=AUTH)
        assert answer.status_code == 200
        assert SPA_MARKER in answer.text


class TestTheCardSJson:
    def test_the_backend_json_is_byte_for_byte_the_starlette_router_s(self, client) -> None:
        """Both routers answer from one implementation: same bytes, same headers (DOC-3)."""
        config = loom_config(HOSTILE_DASHBOARD)
        app = client(nerve_shaped_app(before_nerve=[router_for(config)]))
        standalone = TestClient(Starlette(routes=memory_router(config).routes))
        answer = app.get("/api/memory/backend", headers=AUTH)
        expected = standalone.get("/api/memory/backend")
        assert answer.status_code == 200
        assert answer.content == expected.content
        for header in ("content-type", "content-security-policy", "x-content-type-options"):
            assert answer.headers[header] == expected.headers[header]
        assert_security_headers(answer)

    def test_a_hostile_dashboard_address_is_escaped_and_reads_back_the_same(self, client) -> None:
        app = client(nerve_shaped_app(before_nerve=[router_for(loom_config(HOSTILE_DASHBOARD))]))
        answer = app.get("/api/memory/backend", headers=AUTH)
        for character in "<>&":
            assert character not in answer.text, answer.text
        assert answer.json()["dashboard_url"] == HOSTILE_DASHBOARD

    def test_a_hostile_error_in_the_diagnostics_is_escaped_and_reads_back_the_same(
        self, configure, client
    ) -> None:
        """LOOM-4: Loom's error text is shown as given, never as markup."""
        snapshot = {"last_error": {"message": HOSTILE_MESSAGE, "op": "health"}}
        router = router_for(configure(LOOM), DiagnosticsSnapshot(snapshot))
        answer = client(nerve_shaped_app(before_nerve=[router])).get(
            "/api/diagnostics/memory", headers=AUTH
        )
        assert answer.status_code == 200
        for character in "<>&\u2028":
            assert character not in answer.text, answer.text
        assert answer.json() == {"backend": "loom", **snapshot}
        assert_security_headers(answer)

    def test_under_memu_the_card_says_memory_is_kept_in_memu(self, configure, client) -> None:
        app = client(nerve_shaped_app(before_nerve=[router_for(configure(MEMU))]))
        assert app.get("/api/memory/backend", headers=AUTH).json() == {
            "backend": "memu",
            "kept_in": "memU",
            "dashboard_url": None,
        }
        assert app.get("/api/diagnostics/memory", headers=AUTH).json() == {
            "backend": "memu",
            "kept_in": "memU",
        }

    def test_a_method_a_card_route_does_not_take_is_the_json_405_with_the_headers(
        self, configure, client
    ) -> None:
        app = client(nerve_shaped_app(before_nerve=[router_for(configure(LOOM))]))
        answer = app.post("/api/memory/backend", headers=AUTH)
        assert answer.status_code == 405
        assert answer.headers["allow"] == "GET"
        assert "not allowed" in answer.json()["error"]
        assert_security_headers(answer)

    def test_a_backend_started_by_the_app_s_lifespan_is_found_on_each_request(
        self, configure
    ) -> None:
        """Nerve builds its routes before its lifespan starts the engine: a function finds it."""
        snapshot = {"gateway_url": "http://127.0.0.1:8787", "breaker": {"state": "closed"}}
        engine: dict[str, Any] = {"memory_at_start": DiagnosticsSnapshot(snapshot)}
        router = router_for(configure(LOOM), lambda: engine.get("memory"))
        shaped = nerve_shaped_app(before_nerve=[router], engine=engine)
        not_started = TestClient(shaped.app)  # no lifespan run: the engine is not there yet
        before = not_started.get("/api/diagnostics/memory", headers=AUTH).json()
        with TestClient(shaped.app) as app:
            running = app.get("/api/diagnostics/memory", headers=AUTH).json()
        assert before["available"] is False
        assert running == {"backend": "loom", **snapshot}

    def test_before_the_backend_runs_the_configuration_speaks(self, configure, client) -> None:
        router = router_for(configure(LOOM), lambda: None)
        app = client(nerve_shaped_app(before_nerve=[router]))
        answer = app.get("/api/diagnostics/memory", headers=AUTH).json()
        assert answer["available"] is False
        assert answer["gateway_url"] == "http://127.0.0.1:8787"


class TestNerveSOpenApi:
    def test_the_card_is_documented_and_the_refusals_are_not(self, configure) -> None:
        """Nerve's /openapi.json still builds, without duplicate operation warnings."""
        shaped = nerve_shaped_app(before_nerve=[router_for(configure(LOOM))])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            paths = shaped.app.openapi()["paths"]
        assert "/api/memory/backend" in paths
        assert "/api/diagnostics/memory" in paths
        assert "/api/memory/memu/{rest}" not in paths
        assert set(paths["/api/memory/memu/categories"]) == {"post"}  # Nerve's own


class TestImportCost:
    def test_provisioner_web_loads_fastapi_only_when_fastapi_router_is_asked_for(self) -> None:
        """The Starlette page needs no FastAPI; the name ``fastapi_router`` brings it in."""
        code = (
            "import json, sys\n"
            "import provisioner.web as web\n"
            "before = 'fastapi' in sys.modules\n"
            "router = web.fastapi_router\n"
            "print(json.dumps([before, 'fastapi' in sys.modules, callable(router)]))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        )
        assert json.loads(done.stdout) == [False, True, True]

    def test_another_name_is_still_an_attribute_error(self) -> None:
        import provisioner.web

        with pytest.raises(AttributeError, match="no_such_name"):
            provisioner.web.no_such_name  # noqa: B018
