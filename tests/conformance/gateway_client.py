"""The client under test for the MCP conformance suite's client scenarios: the gateway itself.

``python tests/conformance/gateway_client.py <server-url>`` is the command the suite spawns, with the URL of the
scenario's server appended (and ``MCP_CONFORMANCE_SCENARIO`` naming the scenario). It declares that server as an
``mcp`` source of a fresh definitions directory, serves the gateway on it (a free port of 127.0.0.1, auth off),
and through the gateway's own ``/mcp`` lists the tools and calls each once. The scenario server thus meets the
gateway's upstream client: its connect, handshake, listing and calls are what the suite judges. What the server
asks during a call (elicitation) the gateway relays to the client here, which accepts with the requested
schema's defaults, as a user who changes nothing would.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

# Run as a script: tests/, for support, and the checkout's own gateway (not an installed one's, which a worktree's
# run would otherwise test).
sys.path[:0] = [str(Path(__file__).resolve().parent.parent), str(Path(__file__).resolve().parent.parent.parent)]
from support import running

# The client ID metadata document URL the suite's CIMD scenarios expect (it is not fetched).
CIMD_URL = "https://conformance-test.local/client-metadata.json"
MAX_AUTHORIZATIONS = 3  # a user who clicks "connect" again when asked, but not forever
WAIT_S = 30.0  # for the tools once authorized (a rebuild); the suite's own timeout bounds the whole run
AGAIN_S = 5.0  # a status still asking this long after an authorization asks again
CONNECT = re.compile(r"/oauth/connect/[A-Za-z0-9_-]+")
# A value of each JSON type for a required argument: the scenarios judge that the call arrives, not its values.
SAMPLE_VALUES: dict[str, Any] = {"number": 2, "integer": 2, "string": "conformance", "boolean": True,
                                 "object": {}, "array": []}


def arguments_for(schema: dict[str, Any]) -> dict[str, Any]:
    """Arguments for a tool's required properties, one sample value of each declared type."""
    properties = schema.get("properties") or {}
    return {name: SAMPLE_VALUES.get(properties.get(name, {}).get("type"), "conformance")
            for name in schema.get("required") or []}


async def accept_defaults(context: Any, params: mcp_types.ElicitRequestParams) -> mcp_types.ElicitResult:
    """The user's answer to a form: every field's default, changed by nobody."""
    properties = (getattr(params, "requested_schema", None) or {}).get("properties") or {}
    return mcp_types.ElicitResult(action="accept", content={name: field["default"] for name, field in properties.items()
                                                            if "default" in field})


def source(server_url: str) -> dict[str, Any]:
    """The scenario's server as an ``mcp`` source, with OAuth as the scenario's context hands it over (its
    secrets put in the environment, named as secrets)."""
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    oauth: dict[str, Any] = {"client_metadata_url": CIMD_URL}
    if "client_id" in context:
        oauth["client_id"] = context["client_id"]
    for key, declared, secret in (("client_secret", "client_secret", "CONFORMANCE_CLIENT_SECRET"),
                                  ("private_key_pem", "private_key", "CONFORMANCE_PRIVATE_KEY")):
        if key in context:
            os.environ[secret] = context[key]
            oauth[declared] = f"{{{{ secrets.{secret} }}}}"
    if context.get("signing_algorithm"):
        oauth["signing_alg"] = context["signing_algorithm"]
    if "client-credentials" in os.environ.get("MCP_CONFORMANCE_SCENARIO", ""):
        oauth["grant"] = "client_credentials"
    if "idp_id_token" in context:  # SEP-990: the enterprise identity provider and the gateway's assertion
        os.environ["CONFORMANCE_ID_TOKEN"] = context["idp_id_token"]
        oauth["grant"] = "cross_app_access"
        oauth["idp"] = {"token_endpoint": context["idp_token_endpoint"], "client_id": context["idp_client_id"],
                        "id_token": "{{ secrets.CONFORMANCE_ID_TOKEN }}"}
    return {"id": "scenario", "mcp": {"url": server_url, "auth": {"oauth": oauth}}}


class Browser:
    """The admin's browser: follows the gateway's connect link to the authorization server and back."""

    def __init__(self, base: str):
        self.base = base
        self.http = httpx2.AsyncClient(follow_redirects=True, timeout=30)
        self.authorizations = 0

    async def authorize(self, text: str) -> bool:
        """Follow the connect link ``text`` names, if it names one and the user has not given up."""
        link = CONNECT.search(text)
        if link is None or self.authorizations >= MAX_AUTHORIZATIONS:
            return False
        self.authorizations += 1
        page = await self.http.get(self.base + link[0])
        print("authorization", self.authorizations, page.status_code, page.text[-300:])
        return page.status_code == 200  # the gateway's page says it could not: the user stops there

    async def status(self) -> dict[str, Any]:
        """The scenario source's status (``authorize`` names the connect link when it needs an authorization)."""
        status = (await self.http.get(f"{self.base}/status")).json()
        return next((s for s in status.get("sources", []) if s.get("id") == "scenario"), {})


async def tools(session: ClientSession, browser: Browser) -> list[mcp_types.Tool] | None:
    """The tools the gateway serves once the source is up (authorizing when its status asks, again when it still
    asks a while after); None if it never came up."""
    deadline = time.monotonic() + WAIT_S
    clicked = -AGAIN_S
    while time.monotonic() < deadline:
        listing = await session.list_tools()
        status = await browser.status()
        if listing.tools or status.get("health") == "ok":
            return listing.tools
        wanted = status.get("authorize")
        if wanted and time.monotonic() - clicked >= AGAIN_S:
            if not await browser.authorize(wanted):
                return None
            clicked = time.monotonic()
        elif not wanted and browser.authorizations:
            return None  # authorized, and it fails for another reason: nothing the user can do
        await asyncio.sleep(0.3)
    return None


async def exercise(base: str) -> None:
    browser = Browser(base)
    async with streamable_http_client(f"{base}/mcp") as (read, write), \
            ClientSession(read, write, elicitation_callback=accept_defaults) as session, browser.http:
        await session.initialize()
        listed = await tools(session, browser)
        if listed is None:
            sys.exit("the gateway never served the scenario's server")
        print("tools:", [tool.name for tool in listed])
        for tool in listed:
            result = await session.call_tool(tool.name, arguments_for(tool.input_schema))
            while result.is_error and await browser.authorize(json.dumps(result.model_dump(mode="json"))):
                result = await session.call_tool(tool.name, arguments_for(tool.input_schema))  # stepped up
            print(tool.name, json.dumps(result.model_dump(mode="json", exclude_none=True)))


def main(server_url: str) -> None:
    with tempfile.TemporaryDirectory(prefix="conformance-client-") as scratch:
        # The gateway keeps an upstream's tool list under its state directory: this run's own, never another's.
        os.environ["TOOL_GATEWAY_STATE_DIR"] = str(Path(scratch) / "state")
        definitions = Path(scratch) / "definitions"
        definitions.mkdir()
        # JSON is YAML: the declaration as data, whatever the context's values hold.
        (definitions / "scenario.yaml").write_text(json.dumps({"sources": [source(server_url)]}), encoding="utf-8")
        with running(definitions) as served:
            asyncio.run(exercise(served.url))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: gateway_client.py <MCP server URL>")
    main(sys.argv[1])
