"""Which request headers a tool's call may carry, one list for YAML http bindings (``gateway.bindings.httpspec``)
and the bindings an OpenAPI document yields (``gateway.sources.openapi_operations``).

    transport  framing and hop-by-hop headers: the gateway's HTTP client sets them from the url, the body and
               the connection; declared by hand they would contradict it (request smuggling), so never declared
    routing    what a proxy or server in front of the upstream reads as who called, from where, for which URL
               or with which proxy credentials: an admin may fix them, an argument (the model) never sets them
"""

from __future__ import annotations

import re

_TRANSPORT = frozenset({"host", "content-length", "transfer-encoding", "connection", "keep-alive", "te", "trailer",
                        "upgrade"})
_ROUTING = frozenset({"forwarded", "x-original-url", "x-rewrite-url"})
_ROUTING_PREFIXES = ("x-forwarded-", "proxy-")
# RFC 9110 field-name (a token): the only names a header can be sent under.
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")


def is_transport(name: str) -> bool:
    return name.lower() in _TRANSPORT


def is_routing(name: str) -> bool:
    lowered = name.lower()
    return lowered in _ROUTING or lowered.startswith(_ROUTING_PREFIXES)


def is_sendable(name: str) -> bool:
    """Whether ``name`` can be sent as a header's name at all (``{{ x }}`` cannot: braces and spaces)."""
    return bool(_TOKEN.match(name))
