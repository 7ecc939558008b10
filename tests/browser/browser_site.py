"""What the browser tests share besides fixtures: Chromium's extra arguments, the origins, the test app page, ``Site``."""

from __future__ import annotations

from dataclasses import dataclass

from fake_llm import FakeLLM
from support import REPO

from gateway.runtime.gateway import Gateway

# Added to support.CHROMIUM_ARGS: the .test origins (the app's, a stranger's) are this machine's servers.
TEST_ORIGIN_ARGS = ("--disable-quic", "--host-resolver-rules=MAP *.test 127.0.0.1")
ALLOWED_HOST = "app.test"
DISALLOWED_HOST = "evil.test"
ARTIFACTS = REPO / "artifacts"

APP_PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>An app on another origin</title>
<script src="{gateway}/client/gateway-tools.js"></script>
<script>
  window.runs = [];  // every handler run in this page, as the runtime announces it
  window.addEventListener("gatewaytools:executed", function (event) {{ window.runs.push(event.detail); }});
</script>
</head><body><h1>An app that uses the gateway's client tools</h1></body></html>
"""


@dataclass
class Site:
    gateway: str  # http://127.0.0.1:<port>
    gateway_app: Gateway
    pages_port: int
    llm: FakeLLM

    def page_url(self, host: str = ALLOWED_HOST) -> str:
        return f"http://{host}:{self.pages_port}/app.html"
