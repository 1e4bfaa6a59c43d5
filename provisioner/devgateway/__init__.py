"""``nerve dev gateway``: a local stand-in for the MCP gateway with Loom behind it.

It needs the ``dev`` extra (``pip install 'nerve-provisioner[dev]'``: the official ``mcp`` SDK,
uvicorn, starlette, jsonschema). Imports `base`, `runtime` and `templating`; imported by `cli`.

What it serves (``provisioner.devgateway.app``): ``GET /catalog`` listing ``loom``; Loom's
tools at ``/s/loom/mcp`` on the SDK, in stateless streamable HTTP, answering JSON or event
streams; a Loom stand-in with memories in SQLite per namespace
(``provisioner.devgateway.store``); every call's arguments checked against the contract
fixture's schemas (-32602 otherwise); and faults chosen per call from a seed
(``provisioner.devgateway.faults``), switchable with ``--faults SPEC`` and at run time with
``POST /_dev/faults``. It binds 127.0.0.1 only and refuses a non-loopback Host or Origin.

Using it from tests and benchmarks, in the same process::

    from provisioner.devgateway import serve_in_thread

    with serve_in_thread(seed=7, faults="503=0.1") as gateway:
        gateway.base_url                     # "http://127.0.0.1:<free port>"
        gateway.app.store.remember("likes tea")
        gateway.app.faults.switch("hang@loom_memory_set_from_messages")
        gateway.app.calls                    # every tools/call seen: tool, arguments, fault
    # leaving the block stops the server and waits for its thread

or as its own process (for crash tests: kill it, start it again on the same ``--data``)::

    nerve dev gateway --port 0 [--seed N] [--faults SPEC] [--data DIR] [--answers json|sse|mixed]
                      [--older-memory-set]

which prints ``mcp_gateway_url: http://127.0.0.1:<port>`` on stdout once it listens (read the
first line to learn the port), logs one line per call on stderr, and serves until SIGINT or
SIGTERM. Its faults switch at run time with a JSON body (any other content type is refused
415, so no web page can post a form to switch them)::

    curl -X POST <base>/_dev/faults -H 'Content-Type: application/json' -d '{"faults": "policy"}'
"""

from __future__ import annotations

from provisioner.devgateway.app import DevGateway, SeenCall
from provisioner.devgateway.faults import FaultPlan, FaultRule, FaultSpecError, parse_fault_spec
from provisioner.devgateway.serve import RunningGateway, serve_in_thread
from provisioner.devgateway.store import LoomStandIn

__all__ = [
    "DevGateway",
    "FaultPlan",
    "FaultRule",
    "FaultSpecError",
    "LoomStandIn",
    "RunningGateway",
    "SeenCall",
    "parse_fault_spec",
    "serve_in_thread",
]
