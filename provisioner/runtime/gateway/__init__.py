"""The MCP gateway client: catalog, one `tools/call` per POST, the answer readers,
the transport, deadlines, the breaker, and the one tree of outcomes (`errors`).

It imports nothing outside this sub-package but the standard library and httpx.
"""
