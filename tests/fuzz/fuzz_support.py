"""What the fuzz tests share (import as ``from fuzz_support import ...``): Hypothesis settings and the server.

Every property test runs with ``FUZZ`` (or ``fuzz(n)``): derandomized and without the example database, so a
CI run is the same run every time and a failure reproduces from its printed example alone; no deadline, since
the machines are shared and a slow example is not a failure. Example counts are small on purpose: the whole
directory runs in well under two minutes.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

import httpx
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

from gateway.runtime.gateway import Gateway


def fuzz(max_examples: int) -> settings:
    """Hypothesis settings for a bounded, reproducible run of ``max_examples`` examples (times the environment's
    ``GATEWAY_FUZZ_SCALE``, for a deeper run by hand: ``GATEWAY_FUZZ_SCALE=20 python -m pytest tests/fuzz``)."""
    max_examples *= int(os.environ.get("GATEWAY_FUZZ_SCALE", "1"))
    # No explain phase: it re-runs a failing test many times to annotate lines, and CI has a time budget.
    return settings(max_examples=max_examples, derandomize=True, database=None, deadline=None,
                    phases=[Phase.explicit, Phase.generate, Phase.target, Phase.shrink],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                           HealthCheck.filter_too_much, HealthCheck.data_too_large])


@dataclass
class FuzzServer:
    """A running gateway over a private copy of the shipped tools, its HTTP tools aimed at its own demo API."""

    url: str
    gateway: Gateway
    definitions: Path
    client: httpx.Client

    def call(self, tool_id: str, content: bytes, **headers: str) -> httpx.Response:
        return self.client.post(f"/tools/{tool_id}/call", content=content,
                                headers={"content-type": "application/json", **headers})


# An argument error names where in the arguments it is: "at $.lights[0].brightness: ...".
ARGUMENT_ERROR = re.compile(r"^Invalid arguments for tool ")
JSON_PATH = re.compile(r"at \$[^\s:]*")

# The stateless MCP revision: every request stands alone, its envelope in _meta and routing headers set.
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call"}
ENVELOPE = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}

# Any JSON value, small (text without lone surrogates: those are fuzzed on their own, see test_fuzz_bodies).
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=8)
