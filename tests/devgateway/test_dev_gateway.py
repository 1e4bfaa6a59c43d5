"""The dev gateway on loopback: its catalog, its Loom stand-in, its guard and its CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest

from provisioner.devgateway import FaultSpecError, RunningGateway, parse_fault_spec, serve_in_thread
from provisioner.runtime.gateway.catalog import parse_catalog

from .calls import MCP_HEADERS, nerve_without_the_sdk, tools_call

MESSAGE = {"role": "user", "content": "x", "created_at": "2026-01-01T00:00:00Z"}


def rpc_of(response: httpx.Response) -> dict:
    """The JSON-RPC message of a JSON body or of the first ``message`` event of a stream."""
    if response.headers["content-type"].startswith("application/json"):
        return response.json()
    for line in response.text.splitlines():
        if line.startswith("data:"):
            return json.loads(line[5:])
    raise AssertionError(f"no message in {response.text!r}")


class TestCatalog:
    def test_the_catalog_passes_the_runtime_s_strict_reader_and_lists_loom(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        """GW-2: schema version 1, a sha256 digest, loom at /s/loom/mcp with its tools."""
        payload = client.get(f"{gateway.base_url}/catalog").json()
        catalog = parse_catalog(payload, gateway.base_url)
        loom = catalog.require("loom")
        assert loom.url == f"{gateway.base_url}/s/loom/mcp"
        assert "loom_context_pack" in loom.tools
        assert "loom_memory_set_from_messages" in loom.tools

    def test_the_digest_is_the_same_for_the_same_catalog(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        first = client.get(f"{gateway.base_url}/catalog").json()["digest"]
        assert client.get(f"{gateway.base_url}/catalog").json()["digest"] == first


class TestLoopbackGuard:
    @pytest.mark.parametrize(
        "headers",
        [{"Host": "evil.example"}, {"Origin": "http://evil.example"}, {"Host": "10.0.0.8:80"}],
    )
    def test_a_request_naming_another_host_or_origin_is_refused(
        self, gateway: RunningGateway, client: httpx.Client, headers: dict[str, str]
    ) -> None:
        response = client.get(f"{gateway.base_url}/catalog", headers=headers)
        assert response.status_code == 403

    def test_a_loopback_origin_is_let_through(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        response = client.get(
            f"{gateway.base_url}/catalog", headers={"Origin": "http://localhost:3000"}
        )
        assert response.status_code == 200


class TestLoomStandIn:
    def test_extraction_stores_one_memory_per_message_with_a_verdict(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        messages = [
            {**MESSAGE, "content": "likes green tea"},
            {**MESSAGE, "role": "assistant", "content": "likes green tea"},
        ]
        tool = "loom_memory_set_from_messages"
        response = tools_call(client, gateway.base_url, tool, {"messages": messages})
        answer = rpc_of(response)["result"]["structuredContent"]
        assert answer["accepted"] == 2
        assert [written["verdict"] for written in answer["written"]] == ["clear", "duplicate"]
        assert gateway.app.store.memory_texts() == ["likes green tea"]

    def test_pack_text_is_escaped_as_loom_escapes_it(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        gateway.app.store.remember("a <b> & c")
        answer = rpc_of(
            tools_call(
                client,
                gateway.base_url,
                "loom_context_pack",
                {"mode": "startup", "sections": ["memories"]},
            )
        )["result"]["structuredContent"]
        assert answer["sections"]["memories"]["items"][0]["text"] == "a &lt;b&gt; &amp; c"

    def test_search_answers_raw_text_and_abstains_when_nothing_matches(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        gateway.app.store.remember("a <b> & tea")
        found = rpc_of(tools_call(client, gateway.base_url, "loom_search", {"query": "tea"}))
        assert found["result"]["structuredContent"]["results"][0]["content_excerpt"] == (
            "a <b> & tea"
        )
        missed = rpc_of(tools_call(client, gateway.base_url, "loom_search", {"query": "coffee"}))
        assert missed["result"]["structuredContent"]["abstained"] is True

    def test_the_summary_names_org_dev_and_namespace_agent(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        answer = rpc_of(tools_call(client, gateway.base_url, "loom_namespace_summary", {}))
        summary = answer["result"]["structuredContent"]
        assert (summary["org"], summary["namespace"]) == ("dev", "agent")

    @pytest.mark.parametrize(
        ("tool", "arguments"),
        [
            ("loom_search", {"query": "tea", "top_k": 1000}),
            ("loom_search", {"query": "tea", "surprise": 1}),
            ("loom_context_pack", {"mode": "whenever"}),
            ("loom_memory_set_from_messages", {"messages": [{**MESSAGE, "role": "robot"}]}),
        ],
    )
    def test_arguments_the_fixture_s_schema_refuses_get_invalid_params(
        self, gateway: RunningGateway, client: httpx.Client, tool: str, arguments: dict
    ) -> None:
        """Every call is validated against the contract fixture's params schema (-32602)."""
        answer = rpc_of(tools_call(client, gateway.base_url, tool, arguments))
        assert answer["error"]["code"] == -32602

    def test_answers_come_as_json_and_as_event_streams(self, client: httpx.Client) -> None:
        from provisioner.devgateway import serve_in_thread

        kinds = set()
        for answers in ("json", "sse"):
            with serve_in_thread(answers=answers) as gateway:
                response = tools_call(client, gateway.base_url, "loom_namespace_summary", {})
                kinds.add(response.headers["content-type"].split(";")[0])
                assert rpc_of(response)["result"]["structuredContent"]["org"] == "dev"
        assert kinds == {"application/json", "text/event-stream"}

    @pytest.mark.parametrize(
        ("tool", "arguments"),
        [
            ("loom_context_pack", {"mode": "startup", "sections": ["memories"]}),
            ("loom_search", {"query": "tea", "top_k": 10}),
            ("loom_search", {"query": "nothing-matches-this"}),
            ("loom_memory_set_from_messages", {"messages": [MESSAGE], "defer": False}),
            ("loom_memory_set_from_messages", {"messages": [MESSAGE], "defer": True}),
            ("loom_namespace_summary", {}),
            ("loom_memory_set", {"text": "likes tea", "proposed": True}),
        ],
    )
    def test_every_answer_fits_the_op_s_result_schema_in_the_fixture(
        self, gateway: RunningGateway, client: httpx.Client, tool: str, arguments: dict
    ) -> None:
        """The stand-in answers in Loom's shapes, so tests against it mean something."""
        import jsonschema

        gateway.app.store.remember("green tea")
        answer = rpc_of(tools_call(client, gateway.base_url, tool, arguments))
        schema = gateway.app.tools[tool].result_schema
        jsonschema.validate(answer["result"]["structuredContent"], schema)


def tools_list(http: httpx.Client, base_url: str) -> dict:
    """One raw MCP ``tools/list`` POST; its JSON-RPC answer."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    return rpc_of(http.post(f"{base_url}/s/loom/mcp", json=body, headers=MCP_HEADERS))


def memory_set_properties(answer: dict) -> set[str]:
    (tool,) = [t for t in answer["result"]["tools"] if t["name"] == "loom_memory_set"]
    return set(tool["inputSchema"]["properties"])


class TestToolsList:
    def test_tools_list_declares_each_tool_with_its_schema_and_no_fault_plays_on_it(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        """REL-8: what a caller reads to send only what the live Loom declares."""
        gateway.app.faults.switch("503")
        answer = tools_list(client, gateway.base_url)
        names = {tool["name"] for tool in answer["result"]["tools"]}
        assert names == set(gateway.app.tools)
        assert {"kind", "tags", "created_at", "happened_at"} <= memory_set_properties(answer)
        assert (gateway.app.listings, len(gateway.app.calls)) == (1, 0)

    def test_an_older_memory_set_declares_no_kind_tags_or_dates_and_refuses_them(
        self, client: httpx.Client
    ) -> None:
        with serve_in_thread(seed=3, older_memory_set=True) as older:
            declared = memory_set_properties(tools_list(client, older.base_url))
            refused = rpc_of(
                tools_call(
                    client, older.base_url, "loom_memory_set", {"text": "tea", "kind": "event"}
                )
            )
            taken = rpc_of(tools_call(client, older.base_url, "loom_memory_set", {"text": "tea"}))
        assert declared == {"text", "memory_key", "namespace", "pinned", "proposed"}
        assert refused["error"]["code"] == -32602
        assert "error" not in taken


class TestFaultSpec:
    def test_a_rule_names_its_fault_argument_tool_and_probability(self) -> None:
        (rule,) = parse_fault_spec("coded:GRANT_BUSY@loom_search=0.5")
        assert (rule.name, rule.argument, rule.tool, rule.probability) == (
            "coded",
            "GRANT_BUSY",
            "loom_search",
            0.5,
        )

    @pytest.mark.parametrize(
        "spec", ["bogus", "policy=2", "policy=0", "fail-text", "hang:5", "too-large:lots"]
    )
    def test_a_bad_rule_is_refused_with_its_text(self, spec: str) -> None:
        with pytest.raises(FaultSpecError, match="fault rule"):
            parse_fault_spec(spec)

    def test_the_same_seed_draws_the_same_faults(self) -> None:
        from provisioner.devgateway import FaultPlan

        draws = []
        for _ in range(2):
            plan = FaultPlan("503=0.5", seed=11)
            draws.append([plan.choose("loom_search", b"{}") is not None for _ in range(40)])
        assert draws[0] == draws[1]
        assert True in draws[0] and False in draws[0]

    def test_faults_switch_at_run_time_through_the_dev_endpoint(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        switched = client.post(f"{gateway.base_url}/_dev/faults", json={"faults": "policy"})
        assert switched.json()["faults"] == "policy"
        answer = rpc_of(tools_call(client, gateway.base_url, "loom_namespace_summary", {}))
        assert answer["error"]["code"] == -32001
        refused = client.post(f"{gateway.base_url}/_dev/faults", json={"faults": "nonsense"})
        assert refused.status_code == 400
        assert gateway.app.faults.spec == "policy"


class TestCommandLine:
    @pytest.mark.slow
    def test_port_zero_prints_the_config_line_with_the_port_it_took(self) -> None:
        process = subprocess.Popen(
            [sys.executable, "-m", "provisioner", "dev", "gateway", "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline().strip()
            assert line.startswith("mcp_gateway_url: http://127.0.0.1:")
            base_url = line.split(": ", 1)[1]
            with httpx.Client(trust_env=False, timeout=10) as http:
                assert http.get(f"{base_url}/catalog").status_code == 200
        finally:
            process.terminate()
            process.wait(timeout=30)

    def test_a_data_path_that_is_a_file_is_one_line_and_exit_2(self, run_nerve, tmp_path) -> None:
        from tests.support.processes import assert_one_line_error

        (tmp_path / "taken").write_text("a file")
        result = run_nerve("dev", "gateway", "--port", "0", "--data", str(tmp_path / "taken"))
        assert_one_line_error(result, "--data")

    def test_a_damaged_store_in_the_data_folder_is_one_line_and_exit_2(
        self, run_nerve, tmp_path
    ) -> None:
        """REL-4: the file named, its fault said, no traceback and no URL to use."""
        from provisioner.devgateway.store import DATABASE_FILE
        from tests.support.processes import assert_one_line_error

        stored = tmp_path / "data" / DATABASE_FILE
        stored.parent.mkdir()
        stored.write_bytes(b"not a database, " * 512)
        result = run_nerve("dev", "gateway", "--port", "0", "--data", str(stored.parent))
        assert_one_line_error(result, str(stored), "damaged")
        assert result.stdout == ""

    def test_a_bad_fault_spec_is_one_line_and_exit_2(self, run_nerve) -> None:
        from tests.support.processes import assert_one_line_error

        result = run_nerve("dev", "gateway", "--port", "0", "--faults", "bogus")
        assert_one_line_error(result, "--faults", "bogus")

    def test_without_the_dev_extra_one_line_says_how_to_install_it(self) -> None:
        """The runtime never needs the SDK; the dev gateway says how to get it."""
        done = nerve_without_the_sdk("dev", "gateway", "--port", "0")
        assert done.returncode == 2
        (line,) = done.stderr.strip().splitlines()
        assert "pip install 'nerve-provisioner[dev]'" in line
