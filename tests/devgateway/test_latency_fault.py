"""The dev gateway's ``latency:SECONDS[@TOOL]`` fault, and the fault names in its help.

A slow Loom is what makes a backlog slow to sweep one window at a time (SWEEP-14): the latency
rule lets a developer see the concurrent sweep at work against ``nerve dev gateway``. These
tests hold the rule's spelling and bounds, how it is drawn beside the other rules (the same
seed still draws the same faults), that the gateway answers a call under it as Loom, and that
``nerve dev gateway --help`` lists the names from ``FAULT_NAMES`` itself.
"""

from __future__ import annotations

import random
import subprocess
import sys

import httpx
import pytest

from provisioner.devgateway import FaultPlan, FaultSpecError, RunningGateway, parse_fault_spec
from provisioner.devgateway.faults import FAULT_NAMES, LATENCY_MAX_S, FaultDecision, fault_usage

from .calls import nerve_without_the_sdk, tools_call
from .test_dev_gateway import rpc_of

EXTRACT = "loom_memory_set_from_messages"
DRAWS = 60  # calls drawn per plan: enough for a probability of 0.5 to show both ways
CALLS_IN_A_ROW = 12  # with seed 3, answers of both kinds (JSON and event stream)


class TestLatencyRule:
    def test_a_rule_names_its_seconds_tool_and_probability(self) -> None:
        (rule,) = parse_fault_spec(f"latency:1.5@{EXTRACT}=0.5")
        assert (rule.name, rule.delay_s, rule.tool, rule.probability) == (
            "latency",
            1.5,
            EXTRACT,
            0.5,
        )
        assert str(rule) == f"latency:1.5@{EXTRACT}=0.5"

    @pytest.mark.parametrize("seconds", ["1", "0.001", "600", "12.25"])
    def test_seconds_above_zero_up_to_the_bound_are_taken(self, seconds: str) -> None:
        (rule,) = parse_fault_spec(f"latency:{seconds}")
        assert 0 < rule.delay_s <= LATENCY_MAX_S and rule.delay_s == float(seconds)

    @pytest.mark.parametrize(
        "rule",
        [
            "latency",  # no seconds
            "latency:0",
            "latency:0.000",
            "latency:600.001",
            "latency:9999",
            "latency:-1",
            "latency:1e3",
            "latency:inf",
            "latency:nan",
            "latency:.5",
            "latency:1.",
            "latency:1.2345",
            "latency: 1",
            "latency:١",  # an Arabic-Indic one
            "latency:２",  # a full-width two
            "latency:1_0",
        ],
    )
    def test_anything_else_is_refused_in_one_line_naming_the_rule(self, rule: str) -> None:
        with pytest.raises(FaultSpecError) as refused:
            parse_fault_spec(rule)
        text = str(refused.value)
        assert "\n" not in text and repr(rule) in text and "latency" in text


class TestTheDraw:
    def test_latency_delays_loom_s_answer_and_a_fault_that_plays_answers_at_once(self) -> None:
        plan = FaultPlan("latency:2,503=0.5", seed=4)
        decisions = [plan.decide(EXTRACT, b"{}") for _ in range(DRAWS)]
        faults = [d for d in decisions if d.rule is not None]
        answered = [d for d in decisions if d.rule is None]
        assert faults and answered
        assert {d.delay_s for d in faults} == {0.0} and {d.rule.name for d in faults} == {"503"}
        assert {d.delay_s for d in answered} == {2.0}

    def test_a_latency_for_one_tool_leaves_the_others_alone(self) -> None:
        plan = FaultPlan(f"latency:3@{EXTRACT}")
        assert plan.decide(EXTRACT, b"{}") == FaultDecision(None, 3.0)
        assert plan.decide("loom_search", b"{}") == FaultDecision()

    def test_choose_never_gives_a_latency_rule(self) -> None:
        """A latency rule decides no answer: the app answers as Loom under it."""
        plan = FaultPlan("latency:1")
        assert [plan.choose(EXTRACT, b"{}") for _ in range(5)] == [None] * 5

    def test_a_spec_without_latency_draws_the_same_faults_from_the_same_seed(self) -> None:
        """Latency rules are drawn only after the answering rules: old seeds still hold."""
        expected = random.Random(11)
        plan = FaultPlan("503=0.5,hang@loom_search=0.5", seed=11)
        for _ in range(DRAWS):
            rule = plan.choose(EXTRACT, b"{}")
            assert (rule is not None) == (expected.random() < 0.5)

    def test_a_latency_with_a_probability_is_drawn_from_the_seed(self) -> None:
        draws = []
        for _ in range(2):
            plan = FaultPlan("latency:1=0.5", seed=9)
            draws.append([plan.decide(EXTRACT, b"{}").delay_s for _ in range(DRAWS)])
        assert draws[0] == draws[1]
        assert set(draws[0]) == {0.0, 1.0}


class TestOnTheGateway:
    def test_a_call_under_a_latency_rule_is_answered_by_loom(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        gateway.app.faults.switch("latency:0.01")
        answer = rpc_of(tools_call(client, gateway.base_url, "loom_namespace_summary", {}))
        assert "error" not in answer and answer["result"]["structuredContent"]
        seen = gateway.app.calls[-1]
        assert seen.tool == "loom_namespace_summary" and seen.answered_as in ("json", "sse")

    def test_a_call_of_no_session_counts_toward_no_session_s_overlap(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        """SWEEP-14's counter: probes and loom_op carry no session id; only calls that do
        count as one session's, so a sweep's own status calls never look like two windows."""
        rpc_of(tools_call(client, gateway.base_url, "loom_namespace_summary", {}))
        assert (gateway.app.most_at_once, gateway.app.most_for_one_session) == (1, 0)
        message = {"role": "user", "content": "tea", "created_at": "2026-11-30T09:00:00Z"}
        arguments = {"messages": [message], "session_id": "s-1"}
        answer = rpc_of(tools_call(client, gateway.base_url, EXTRACT, arguments))
        assert "error" not in answer
        assert (gateway.app.most_at_once, gateway.app.most_for_one_session) == (1, 1)

    def test_a_call_has_left_the_overlap_count_before_its_caller_has_the_whole_answer(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        """One call after another, each sent once the last answer was read to its end, never
        overlaps, whether the answer came as JSON or as an event stream."""
        message = {"role": "user", "content": "tea", "created_at": "2026-11-30T09:00:00Z"}
        for turn in range(CALLS_IN_A_ROW):
            arguments = {"messages": [message], "session_id": "s-1"}
            answer = rpc_of(tools_call(client, gateway.base_url, EXTRACT, arguments))
            assert "error" not in answer
            assert gateway.app.answering == [], turn
        modes = {call.answered_as for call in gateway.app.calls}
        assert modes == {"json", "sse"}
        assert (gateway.app.most_at_once, gateway.app.most_for_one_session) == (1, 1)

    def test_a_latency_rule_switches_in_at_run_time_and_a_bad_one_is_refused(
        self, gateway: RunningGateway, client: httpx.Client
    ) -> None:
        switch = f"{gateway.base_url}/_dev/faults"
        assert client.post(switch, json={"faults": "latency:0.5"}).json()["faults"] == (
            "latency:0.5"
        )
        refused = client.post(switch, json={"faults": "latency:9999"})
        assert refused.status_code == 400 and "latency" in refused.json()["detail"]
        assert gateway.app.faults.spec == "latency:0.5"


class TestCommandLine:
    def test_the_help_lists_every_fault_from_fault_names(self, run_nerve) -> None:
        result = run_nerve("dev", "gateway", "--help")
        assert result.returncode == 0, result.stderr
        flat = " ".join(result.stdout.split())
        assert all(name in flat for name in FAULT_NAMES)
        assert ", ".join(fault_usage()) in flat

    def test_building_the_parser_imports_nothing_of_the_dev_gateway(self) -> None:
        """``nerve --help`` stays fast: the names are read only when that help is shown."""
        code = (
            "import sys\n"
            "from provisioner.cli.main import build_parser\n"
            "build_parser(['dev', 'gateway'])\n"
            "print(sorted(m for m in sys.modules if m.startswith('provisioner.devgateway')))\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "[]"

    def test_without_the_dev_extra_the_help_says_how_to_install_it(self) -> None:
        done = nerve_without_the_sdk("dev", "gateway", "--help")
        assert done.returncode == 0, done.stderr
        unwrapped = "".join(done.stdout.split())  # the help wraps lines at hyphens too
        assert "pipinstall'nerve-provisioner[dev]'" in unwrapped

    def test_a_bad_latency_is_one_line_and_exit_2(self, run_nerve) -> None:
        from tests.support.processes import assert_one_line_error

        result = run_nerve("dev", "gateway", "--port", "0", "--faults", "latency:601")
        assert_one_line_error(result, "--faults", "latency:601")
