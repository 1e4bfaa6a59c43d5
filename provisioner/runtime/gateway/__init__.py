"""The MCP gateway client, by concept, each module importing only those listed before it:

``masking`` (a URL's secrets kept out of every line printed, REL-14; it imports nothing),
``errors`` (every way a call can fail, GW-5), ``protocol`` (the wire format as pure
functions: the request, and what an answer means), ``transport`` (the httpx client, one
answer read off the wire, the pool kept sound under cancellation), ``breaker`` (GW-7),
``catalog`` (GW-2) and ``client`` (``McpGatewayServer``, one call per POST within one
deadline, and ``LoomConnection``, one kept client for Loom's URL, GW-3…GW-8).

It imports nothing outside this sub-package but the standard library, httpx and the runtime's
own floor (``provisioner.runtime.clock``, ``provisioner.runtime.memory_contract``).
"""
