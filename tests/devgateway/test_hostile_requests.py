"""The dev gateway against hostile requests: a 4xx that says why, never a 500 or a hang.

A developer's gateway listens on loopback, where any local program and any web page the
developer opens can reach it. So deep JSON, fault specs that would break every later call,
cross-site form posts and bodies that claim to be huge are all answered with a clear refusal,
and the fault rules in force stay as they were.
"""

from __future__ import annotations

import json
import socket
from urllib.parse import urlsplit

import httpx
import pytest

from provisioner.devgateway import FaultSpecError, RunningGateway, parse_fault_spec
from provisioner.devgateway.app import FAULTS_REQUEST_MAX_BYTES, REQUEST_MAX_BYTES
from tests.support.processes import RunNerve, assert_one_line_error

from .calls import MCP_HEADERS, tools_call

DEEP = b"[" * 30_000 + b"]" * 30_000
JSON_HEADERS = {"Content-Type": "application/json"}
# Rules that parse as text but cannot be played: int() refuses "²", a lone surrogate cannot
# be encoded, Python will not convert thousands of digits, and float() reads a full-width zero.
UNPLAYABLE_SPECS = [
    pytest.param("too-large:\u00b2", id="too-large-superscript-two"),
    pytest.param("429:\u00b2", id="429-superscript-two"),
    pytest.param("too-large:\u0663", id="too-large-arabic-indic-three"),
    pytest.param("fail-text:\ud800", id="fail-text-lone-surrogate"),
    pytest.param("coded:\udfff", id="coded-lone-surrogate"),
    pytest.param("too-large:" + "9" * 5_000, id="too-large-5000-digits"),
    pytest.param("policy=\uff10.5", id="probability-full-width-zero"),
]


def switch(client: httpx.Client, gateway: RunningGateway, spec: str) -> httpx.Response:
    """``POST /_dev/faults`` as a JSON body; ``json.dumps`` writes a surrogate as ``\\ud800``."""
    body = json.dumps({"faults": spec}).encode()
    return client.post(f"{gateway.base_url}/_dev/faults", content=body, headers=JSON_HEADERS)


def still_answers(client: httpx.Client, gateway: RunningGateway) -> None:
    """A call after the refusal is answered by Loom, as before it."""
    response = tools_call(client, gateway.base_url, "loom_namespace_summary", {})
    assert response.status_code == 200, response.text


class TestDeepJsonIsABadRequest:
    def test_30000_nested_brackets_at_the_fault_switch_are_a_400_and_the_faults_stay(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        """Nesting is bounded before Python's recursive decoder runs: 400, not a 500."""
        gateway.app.faults.switch("policy@loom_search")
        response = client.post(
            f"{gateway.base_url}/_dev/faults", content=DEEP, headers=JSON_HEADERS
        )
        assert response.status_code == 400
        assert "nested deeper" in response.json()["detail"]
        assert gateway.app.faults.spec == "policy@loom_search"

    def test_30000_nested_brackets_at_loom_s_tools_are_a_json_rpc_parse_error(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        """GW-5's wire: a body that is not readable JSON gets -32700 with HTTP 400."""
        response = client.post(f"{gateway.base_url}/s/loom/mcp", content=DEEP, headers=MCP_HEADERS)
        assert response.status_code == 400
        answer = response.json()
        assert answer["id"] is None
        assert answer["error"]["code"] == -32700
        still_answers(client, gateway)

    def test_deep_nesting_inside_a_call_s_arguments_is_a_parse_error_too(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        """The depth counts wherever the brackets open, not only at the top of the body."""
        body = (
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
            b'"loom_search", "arguments": {"query": ' + DEEP + b"}}}"
        )
        response = client.post(f"{gateway.base_url}/s/loom/mcp", content=body, headers=MCP_HEADERS)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == -32700

    def test_brackets_inside_a_string_are_text_and_the_call_is_answered(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        """The depth scan skips strings (escaped quotes included): a query about brackets works."""
        query = '[{"' * 10_000 + "tea"
        response = tools_call(client, gateway.base_url, "loom_search", {"query": query})
        assert response.status_code == 200
        assert gateway.app.calls[-1].arguments == {"query": query}


class TestUnplayableFaultSpecsAreRefused:
    @pytest.mark.parametrize("spec", UNPLAYABLE_SPECS)
    def test_parsing_refuses_a_rule_that_would_fail_on_every_call(self, spec: str) -> None:
        """A rule is checked once, when it is read, instead of on each call it plays on."""
        with pytest.raises(FaultSpecError, match="fault rule"):
            parse_fault_spec(spec)

    @pytest.mark.parametrize("spec", UNPLAYABLE_SPECS)
    def test_the_fault_switch_answers_400_and_calls_go_on_being_answered(
        self, gateway: RunningGateway, client: httpx.Client, spec: str
    ) -> None:
        """Such a spec used to be taken, and then every call answered 500."""
        response = switch(client, gateway, spec)
        assert response.status_code == 400
        assert response.json()["reason"] == "bad_fault_spec"
        assert gateway.app.faults.spec == ""
        still_answers(client, gateway)

    def test_a_faults_value_that_is_not_a_string_is_refused(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        """``{"faults": ["policy"]}`` is not read as the spec ``"['policy']"``."""
        response = client.post(f"{gateway.base_url}/_dev/faults", json={"faults": ["policy"]})
        assert response.status_code == 400
        assert "faults must be a string" in response.json()["detail"]

    @pytest.mark.parametrize(
        "spec",
        [
            pytest.param("too-large:\u00b2", id="too-large-superscript-two"),
            pytest.param("429:\u00b2", id="429-superscript-two"),
            pytest.param("fail-text:\udced\udca0\udc80", id="fail-text-surrogate-bytes"),
        ],
    )
    def test_the_faults_option_refuses_them_in_one_line_with_exit_2(
        self, run_nerve: RunNerve, spec: str
    ) -> None:
        """CONF-7: ``--faults`` bad input is one line, exit 2; the last spec is the bytes of
        a lone surrogate in UTF-8, which Python reads from argv as lone surrogates."""
        result = run_nerve("dev", "gateway", "--port", "0", "--faults", spec)
        assert_one_line_error(result, "--faults", "fault rule")


class TestARuleNamingNoToolIsRefused:
    """``hang@`` reads as "hang for no tool"; it was taken as "hang for every tool"."""

    @pytest.mark.parametrize("spec", ["hang@", "429@ ", "policy@=0.5", "policy,hang@"])
    def test_parsing_refuses_an_at_sign_with_no_tool_after_it(self, spec: str) -> None:
        with pytest.raises(FaultSpecError, match="names no tool after '@'"):
            parse_fault_spec(spec)

    def test_a_rule_for_one_tool_or_for_every_tool_is_still_taken(self) -> None:
        assert [rule.tool for rule in parse_fault_spec("hang@loom_search,hang")] == [
            "loom_search",
            None,
        ]

    def test_the_faults_option_refuses_it_in_one_line_with_exit_2(
        self, run_nerve: RunNerve
    ) -> None:
        """Bad input is one line, exit 2, before anything is served."""
        result = run_nerve("dev", "gateway", "--port", "0", "--faults", "hang@")
        assert_one_line_error(result, "--faults", "names no tool")


class TestTheFaultSwitchTakesOnlyJson:
    @pytest.mark.parametrize(
        "content_type",
        ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None],
    )
    def test_a_post_a_web_page_could_send_without_asking_is_refused_415(
        self, gateway: RunningGateway, client: httpx.Client, content_type: str | None
    ) -> None:
        """A page sends these without a preflight, and may send no Origin: refused (CSRF)."""
        headers = {"Content-Type": content_type} if content_type else {}
        response = client.post(
            f"{gateway.base_url}/_dev/faults", content=b'{"faults": "policy"}', headers=headers
        )
        assert response.status_code == 415
        assert gateway.app.faults.spec == ""

    def test_json_with_a_charset_parameter_switches_the_faults(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        headers = {"Content-Type": "Application/JSON; charset=utf-8"}
        response = client.post(
            f"{gateway.base_url}/_dev/faults", content=b'{"faults": "policy"}', headers=headers
        )
        assert response.status_code == 200
        assert gateway.app.faults.spec == "policy"


def head_only_request(base_url: str, path: str, length: int) -> bytes:
    """Send a POST's headers claiming ``length`` bytes, send no body, and read the answer.

    A gateway that waits for the body never answers; the socket's timeout then fails the
    test instead of letting it hang.
    """
    address = urlsplit(base_url)
    assert address.hostname is not None and address.port is not None
    request = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {length}\r\n\r\n"
    ).encode()
    with socket.create_connection((address.hostname, address.port), timeout=10) as connection:
        connection.sendall(request)
        answer = b""
        while b"\r\n\r\n" not in answer:
            chunk = connection.recv(4096)
            if not chunk:
                break
            answer += chunk
    return answer


def raw_status_line(base_url: str, request: bytes) -> bytes:
    """Send ``request`` as it is (no client would) and read the status line of the answer."""
    address = urlsplit(base_url)
    assert address.hostname is not None and address.port is not None
    with socket.create_connection((address.hostname, address.port), timeout=10) as connection:
        connection.sendall(request)
        return connection.recv(64)


class TestBodyLimits:
    @pytest.mark.parametrize(
        ("path", "limit"),
        [("/_dev/faults", FAULTS_REQUEST_MAX_BYTES), ("/s/loom/mcp", REQUEST_MAX_BYTES)],
    )
    def test_a_content_length_over_the_limit_is_refused_413_before_the_body_is_read(
        self, gateway: RunningGateway, path: str, limit: int
    ) -> None:
        answer = head_only_request(gateway.base_url, path, limit + 1)
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:80]

    def test_a_content_length_of_thousands_of_digits_is_refused_not_a_500(
        self, gateway: RunningGateway
    ) -> None:
        """Any 4xx will do (the HTTP parser may refuse it first); never a 5xx or a hang."""
        request = (
            b"POST /s/loom/mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            b"Content-Length: " + b"9" * 5_000 + b"\r\n\r\n"
        )
        status_line = raw_status_line(gateway.base_url, request)
        assert status_line.startswith(b"HTTP/1.1 4"), status_line

    def test_a_fault_switch_body_over_its_limit_is_413_not_a_bad_spec(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        """Sent in chunks, so no Content-Length says it ahead: counted while it is read."""
        body = json.dumps({"faults": "policy", "pad": "x" * FAULTS_REQUEST_MAX_BYTES}).encode()
        response = client.post(
            f"{gateway.base_url}/_dev/faults",
            content=iter([body[:1000], body[1000:]]),
            headers=JSON_HEADERS,
        )
        assert response.status_code == 413
        assert gateway.app.faults.spec == ""


class TestMalformedHostOrOrigin:
    @pytest.mark.parametrize(
        "headers",
        [
            pytest.param(b"Host: [\r\n", id="host-unclosed-bracket"),
            pytest.param(b"Host: 127.0.0.1\r\nOrigin: http://[\r\n", id="origin-unclosed"),
            pytest.param(b"Host: 127.0.0.1\r\nOrigin: http://[::1\r\n", id="origin-open-ipv6"),
        ],
    )
    def test_a_host_or_origin_that_is_no_url_is_refused_403_not_a_500(
        self, gateway: RunningGateway, headers: bytes
    ) -> None:
        """The loopback guard read these with urlsplit, whose ValueError became a 500."""
        request = b"GET /catalog HTTP/1.1\r\n" + headers + b"\r\n"
        assert raw_status_line(gateway.base_url, request).startswith(b"HTTP/1.1 403 ")


HOSTILE_BODIES = [
    pytest.param(DEEP, id="30000-nested-arrays"),
    pytest.param(b"{" * 30_000, id="30000-unclosed-braces"),
    pytest.param(b'{"a": ' * 20_000, id="20000-unclosed-objects"),
    pytest.param(b"\xff\xfe\x00garbage", id="not-utf8"),
    pytest.param(b'{"faults": "policy", "seed": ' + b"9" * 5_000 + b"}", id="seed-5000-digits"),
    pytest.param(
        b'{"jsonrpc": "2.0", "id": ' + b"9" * 5_000 + b', "method": "tools/call"}',
        id="id-5000-digits",
    ),
    pytest.param(b'{"params": "loom_search"}', id="params-a-string"),
    pytest.param(b"[]", id="an-array"),
    pytest.param(b'"just a string"', id="a-string"),
    pytest.param(b"NaN", id="nan"),
    pytest.param(b"", id="empty"),
]


class TestNoBodyIsA500:
    @pytest.mark.parametrize("body", HOSTILE_BODIES)
    @pytest.mark.parametrize("path", ["/_dev/faults", "/s/loom/mcp"])
    def test_every_hostile_body_gets_an_answer_below_500(
        self, gateway: RunningGateway, client: httpx.Client, path: str, body: bytes
    ) -> None:
        response = client.post(f"{gateway.base_url}{path}", content=body, headers=MCP_HEADERS)
        assert response.status_code < 500, (response.status_code, response.text[:200])
        still_answers(client, gateway)
