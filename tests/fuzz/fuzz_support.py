"""What the fuzz tests share (import as ``from fuzz_support import ...``): Hypothesis settings and the server.

Every property test runs with ``FUZZ`` (or ``fuzz(n)``): derandomized and without the example database, so a
CI run is the same run every time and a failure reproduces from its printed example alone; no deadline, since
the machines are shared and a slow example is not a failure. Example counts are small on purpose: the whole
directory runs in well under two minutes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import httpx
from hypothesis import HealthCheck, settings

from gateway.runtime import Gateway


def fuzz(max_examples: int) -> settings:
    """Hypothesis settings for a bounded, reproducible run of ``max_examples`` examples."""
    return settings(max_examples=max_examples, derandomize=True, database=None, deadline=None,
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
