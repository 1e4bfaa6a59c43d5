"""``nerve web``: the Memory page served on loopback by the real command, in its own process.

Each server is ``python -m provisioner web --port 0`` started here with a clean environment;
the test reads the URL it prints, asks it over loopback, and stops it with a real signal.
Under Loom the gateway is ``nerve dev gateway``'s app, in this process.
"""

from __future__ import annotations

import select
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from provisioner.devgateway import RunningGateway, serve_in_thread
from provisioner.runtime.state import StateStore
from tests.support.processes import RunNerve, assert_one_line_error, clean_environment

START_TIMEOUT_S = 60.0  # a guard against a hung test, not a measure
STOP_TIMEOUT_S = 30.0
URL_LINE_PREFIX = "Memory page: http://127.0.0.1:"
FOREIGN_REQUESTS = [
    pytest.param({"Host": "evil.example"}, id="foreign-host"),
    pytest.param({"Host": "10.0.0.8:80"}, id="lan-host"),
    pytest.param({"Origin": "http://evil.example"}, id="foreign-origin"),
    pytest.param({"Origin": "null"}, id="opaque-origin"),
]


@dataclass
class Web:
    """One running ``nerve web``: its process, the URL it printed, and its second line."""

    process: subprocess.Popen[str]
    page_url: str
    serving_line: str

    @property
    def base_url(self) -> str:
        return self.page_url.removesuffix("/memory")

    @property
    def port(self) -> int:
        return int(self.base_url.rsplit(":", 1)[1])

    def stop(self, number: int = signal.SIGTERM) -> tuple[int, str, str]:
        """Send the signal; the exit status and the rest of stdout and stderr."""
        self.process.send_signal(number)
        out, err = self.process.communicate(timeout=STOP_TIMEOUT_S)
        return self.process.returncode, out, err


StartWeb = Callable[[Path], Web]


def _start(config_dir: Path, home: Path) -> Web:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "provisioner",
            "web",
            "--port",
            "0",
            "--config-dir",
            str(config_dir),
            "--workspace",
            str(home / "workspace"),
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=clean_environment(home),
        cwd=home,
    )
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], START_TIMEOUT_S)
    first = process.stdout.readline() if ready else ""
    if not first.startswith(URL_LINE_PREFIX):
        process.kill()
        _, err = process.communicate(timeout=STOP_TIMEOUT_S)
        raise AssertionError(f"nerve web printed {first!r}; stderr: {err}")
    return Web(process, first.split(": ", 1)[1].strip(), process.stdout.readline().strip())


def _end(web: Web) -> None:
    if web.process.poll() is None:
        web.process.kill()
        web.process.communicate(timeout=STOP_TIMEOUT_S)


@pytest.fixture
def start_web(tmp_path: Path) -> Iterator[StartWeb]:
    """``start_web(config_dir)``: a ``nerve web --port 0`` process, killed if a test left it."""
    started: list[Web] = []
    home = tmp_path / "home"
    home.mkdir()

    def start(config_dir: Path) -> Web:
        web = _start(config_dir, home)
        started.append(web)
        return web

    yield start
    for web in started:
        _end(web)


@pytest.fixture(scope="module")
def memu_web(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Web]:
    """One ``nerve web`` over a memU configuration, shared by the tests that only read."""
    root = tmp_path_factory.mktemp("memu-web")
    config_dir = root / "cfg"
    config_dir.mkdir()
    (config_dir / "config.yaml").write_text("memory:\n  backend: memu\n", encoding="utf-8")
    (root / "home").mkdir()
    web = _start(config_dir, root / "home")
    yield web
    _end(web)


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(trust_env=False, timeout=STOP_TIMEOUT_S) as client:
        yield client


@pytest.fixture
def gateway() -> Iterator[RunningGateway]:
    with serve_in_thread(seed=5) as running:
        yield running


def loom_config(tmp_path: Path, gateway_url: str) -> Path:
    config_dir = tmp_path / "cfg"
    config_dir.mkdir()
    (config_dir / "config.yaml").write_text(
        f"memory:\n  backend: loom\nmcp_gateway_url: {gateway_url}\n", encoding="utf-8"
    )
    return config_dir


def config_with_a_sweep_error(
    tmp_path: Path, gateway: RunningGateway, kind: str, message: str
) -> Path:
    """A Loom configuration whose state file keeps an extraction error of class ``kind``, as a
    sweep in another process leaves it."""
    config_dir = loom_config(tmp_path, gateway.base_url)
    (config_dir / "memory").mkdir()
    with StateStore(config_dir / "memory" / "state.sqlite3") as state:
        state.record_last_error(at=1.8e9, op="extract", kind=kind, message=message)
    return config_dir


def health_calls(gateway: RunningGateway) -> int:
    return sum(call.tool == "loom_namespace_summary" for call in gateway.app.calls)


@pytest.mark.slow
class TestServing:
    def test_port_zero_prints_the_page_url_with_the_port_it_took(self, memu_web: Web) -> None:
        """OPS-3: the first line is the page's URL on 127.0.0.1, naming the real port."""
        assert memu_web.page_url.startswith("http://127.0.0.1:")
        assert memu_web.page_url.endswith("/memory")
        assert memu_web.port > 0
        assert "memory.backend memu" in memu_web.serving_line

    def test_the_page_is_served_with_its_security_headers(
        self, memu_web: Web, http: httpx.Client
    ) -> None:
        """DOC-3: the page rendered on the server, saying memory is kept in memU."""
        page = http.get(memu_web.page_url)
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert "memU" in page.text

    def test_the_card_s_json_routes_answer_for_the_configured_backend(
        self, memu_web: Web, http: httpx.Client
    ) -> None:
        """DOC-3: where memory is kept, and the diagnostics, as Nerve's UI would ask them."""
        backend = http.get(f"{memu_web.base_url}/api/memory/backend")
        assert backend.json() == {"backend": "memu", "kept_in": "memU", "dashboard_url": None}
        found = http.get(f"{memu_web.base_url}/api/diagnostics/memory")
        assert found.json() == {"backend": "memu", "kept_in": "memU"}

    def test_the_root_sends_the_browser_to_the_page(
        self, memu_web: Web, http: httpx.Client
    ) -> None:
        answer = http.get(f"{memu_web.base_url}/")
        assert answer.is_redirect
        assert answer.headers["location"] == "/memory"

    def test_a_path_nothing_serves_is_a_404_with_the_page_s_headers(
        self, memu_web: Web, http: httpx.Client
    ) -> None:
        answer = http.get(f"{memu_web.base_url}/nowhere")
        assert answer.status_code == 404
        assert "/memory" in answer.json()["error"]
        assert answer.headers["x-content-type-options"] == "nosniff"

    def test_under_loom_each_view_of_the_card_probes_loom_through_the_gateway(
        self, start_web: StartWeb, gateway: RunningGateway, http: httpx.Client, tmp_path: Path
    ) -> None:
        """LOOM-3, LOOM-4: the card says what Loom answers now, not at the server's start."""
        web = start_web(loom_config(tmp_path, gateway.base_url))
        assert f"gateway {gateway.base_url}" in web.serving_line
        first = http.get(f"{web.base_url}/api/diagnostics/memory").json()
        assert first["available"] is True
        assert first["identity"]["namespace"] == "agent"
        assert first["identity"]["namespace_source"] == "loom"
        assert health_calls(gateway) == 1
        page = http.get(web.page_url)
        assert page.status_code == 200
        assert "agent" in page.text
        assert health_calls(gateway) == 2

    def test_under_loom_the_card_shows_the_error_the_sweep_left_in_the_state_file(
        self, start_web: StartWeb, gateway: RunningGateway, http: httpx.Client, tmp_path: Path
    ) -> None:
        """LOOM-4: an error met by a sweep in another process shows on the card."""
        message = "Loom answered 503 to the extraction"
        config_dir = config_with_a_sweep_error(tmp_path, gateway, "ServerFault", message)
        web = start_web(config_dir)
        last = http.get(f"{web.base_url}/api/diagnostics/memory").json()["last_error"]
        assert (last["op"], last["message"]) == ("extract", message)

    def test_the_card_says_what_a_kept_failure_means_and_names_its_class_after(
        self, start_web: StartWeb, gateway: RunningGateway, http: httpx.Client, tmp_path: Path
    ) -> None:
        """FLEET-4: the card says what happened, as status and doctor do, not just a class."""
        config_dir = config_with_a_sweep_error(tmp_path, gateway, "NoAnswer", "m")
        page = http.get(start_web(config_dir).page_url).text
        assert "no answer came in time (NoAnswer)" in page

    def test_viewing_the_page_creates_no_state_file(
        self, start_web: StartWeb, gateway: RunningGateway, http: httpx.Client, tmp_path: Path
    ) -> None:
        config_dir = loom_config(tmp_path, gateway.base_url)
        web = start_web(config_dir)
        assert http.get(web.page_url).status_code == 200
        web.stop()
        assert not (config_dir / "memory").exists()


@pytest.mark.slow
class TestLoopbackRule:
    @pytest.mark.parametrize("headers", FOREIGN_REQUESTS)
    @pytest.mark.parametrize("path", ["/memory", "/api/memory/backend", "/api/diagnostics/memory"])
    def test_a_request_naming_another_machine_is_refused(
        self, memu_web: Web, http: httpx.Client, headers: dict[str, str], path: str
    ) -> None:
        """OPS-3: the dev gateway's rule, in front of the page and its JSON."""
        answer = http.get(f"{memu_web.base_url}{path}", headers=headers)
        assert answer.status_code == 403
        assert "127.0.0.1" in answer.json()["error"]

    @pytest.mark.parametrize("origin", ["http://localhost:8788", "http://127.0.0.1"])
    def test_a_loopback_origin_is_let_through(
        self, memu_web: Web, http: httpx.Client, origin: str
    ) -> None:
        assert http.get(memu_web.page_url, headers={"Origin": origin}).status_code == 200

    def test_a_refused_request_makes_no_call_to_loom(
        self, start_web: StartWeb, gateway: RunningGateway, http: httpx.Client, tmp_path: Path
    ) -> None:
        """A page elsewhere cannot make the server spend a gateway call (OPS-3)."""
        web = start_web(loom_config(tmp_path, gateway.base_url))
        refused = http.get(web.page_url, headers={"Host": "evil.example"})
        assert refused.status_code == 403
        assert health_calls(gateway) == 0


class TestOneRule:
    def test_the_page_and_the_dev_gateway_share_one_loopback_rule(self) -> None:
        """OPS-3: "the dev gateway's Host/Origin rules" are one function, not a copy."""
        from provisioner.base import loopback
        from provisioner.devgateway import app
        from provisioner.web import serve

        assert app.is_loopback_request is loopback.is_loopback_request
        assert serve.is_loopback_request is loopback.is_loopback_request

    @pytest.mark.parametrize(
        ("headers", "allowed"),
        [
            ([(b"host", b"127.0.0.1:8788")], True),
            ([(b"host", b"[::1]:8788")], True),
            ([(b"Host", b"LOCALHOST")], True),
            ([(b"host", b"localhost"), (b"origin", b"https://localhost:3000")], True),
            ([], False),
            ([(b"host", b"[::1")], False),
            ([(b"host", b"localhost.evil.example")], False),
            ([(b"host", b"localhost"), (b"origin", b"file://localhost")], False),
        ],
    )
    def test_the_rule_reads_host_and_origin_as_a_browser_sends_them(
        self, headers: list[tuple[bytes, bytes]], allowed: bool
    ) -> None:
        from provisioner.base.loopback import is_loopback_request

        assert is_loopback_request(headers) is allowed


@pytest.mark.slow
class TestStopping:
    @pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
    def test_a_stop_signal_ends_it_with_status_0_and_nothing_on_stderr(
        self, start_web: StartWeb, http: httpx.Client, tmp_path: Path, number: int
    ) -> None:
        """OPS-3: Ctrl-C or a service manager's stop is a clean exit, and frees the port."""
        config_dir = tmp_path / "cfg"
        config_dir.mkdir()
        web = start_web(config_dir)
        assert http.get(web.page_url).status_code == 200
        status, out, err = web.stop(number)
        assert (status, out, err) == (0, "", "")
        with socket.socket() as again:  # no listener is left; TIME_WAIT connections may be
            again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            again.bind(("127.0.0.1", web.port))

    def test_a_stop_while_a_view_waits_on_a_hung_loom_answers_it_and_exits_0(
        self, start_web: StartWeb, tmp_path: Path
    ) -> None:
        """A hung Loom neither holds the stop up nor leaves a cancelled request on stderr."""
        with serve_in_thread(faults="hang@loom_namespace_summary") as hung:
            web = start_web(loom_config(tmp_path, hung.base_url))
            answers: list[int] = []

            def view_page() -> None:
                with httpx.Client(trust_env=False, timeout=STOP_TIMEOUT_S) as own:
                    answers.append(own.get(web.page_url).status_code)

            view = threading.Thread(target=view_page)
            view.start()
            _wait_for(lambda: health_calls(hung) == 1)
            status, _, err = web.stop(signal.SIGTERM)
            view.join(timeout=STOP_TIMEOUT_S)
        assert (status, err) == (0, "")
        assert answers == [200]


def _wait_for(condition: Callable[[], bool]) -> None:
    """Until ``condition`` holds; fails after START_TIMEOUT_S (a guard, not a measure)."""
    done = threading.Event()
    for _ in range(int(START_TIMEOUT_S / 0.02)):
        if condition():
            return
        done.wait(0.02)
    raise AssertionError("the condition never held")


class TestBadInput:
    @pytest.mark.parametrize(
        ("args", "fragment"),
        [
            (["--port", "http"], "--port"),
            (["--port", "70000"], "0-65535"),
            (["--port", "-1"], "0-65535"),
            (["--config-dir", ""], "--config-dir"),
        ],
    )
    def test_a_bad_option_is_one_line_and_exit_2(
        self, run_nerve: RunNerve, args: list[str], fragment: str
    ) -> None:
        assert_one_line_error(run_nerve("web", *args), "web", fragment)

    def test_a_port_already_taken_is_one_line_naming_it(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        (tmp_path / "cfg").mkdir()
        with socket.socket() as taken:
            taken.bind(("127.0.0.1", 0))
            taken.listen()
            port = str(taken.getsockname()[1])
            done = run_nerve("web", "--port", port, "--config-dir", str(tmp_path / "cfg"))
        assert_one_line_error(done, f"--port {port}", "cannot listen on 127.0.0.1")

    def test_a_configuration_that_does_not_load_is_one_line_naming_the_file(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        config_dir = tmp_path / "cfg"
        config_dir.mkdir()
        (config_dir / "config.yaml").write_text("memory: [\n", encoding="utf-8")
        done = run_nerve("web", "--port", "0", "--config-dir", str(config_dir))
        assert_one_line_error(done, "config.yaml", "YAML")

    def test_a_damaged_state_file_is_one_line_and_exit_2(
        self, run_nerve: RunNerve, tmp_path: Path
    ) -> None:
        config_dir = loom_config(tmp_path, "http://127.0.0.1:9")
        (config_dir / "memory").mkdir()
        (config_dir / "memory" / "state.sqlite3").write_bytes(b"not a database" * 100)
        done = run_nerve("web", "--port", "0", "--config-dir", str(config_dir))
        assert_one_line_error(done, "state.sqlite3", "not a database", "move it aside")

    def test_without_the_web_extra_one_line_says_how_to_install_it(self, tmp_path: Path) -> None:
        """The package installs without the web extra; the command says how to get it."""
        code = (
            "import sys\n"
            "class Block:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name.split('.')[0] in ('starlette', 'uvicorn'):\n"
            "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
            "sys.meta_path.insert(0, Block())\n"
            "from provisioner.cli.main import main\n"
            f"sys.exit(main(['web', '--port', '0', '--config-dir', {str(tmp_path)!r}]))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=STOP_TIMEOUT_S,
            env=clean_environment(tmp_path),
        )
        assert_one_line_error(
            done, "nerve-provisioner web needs the web extra", "nerve-provisioner[web]"
        )
