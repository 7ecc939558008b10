"""An MCP source's prompts, resources and resource templates, federated: listed on the gateway's /mcp (on both
revisions) beside its tools, prompts namespaced by the source's prefix, resources under their own URIs; prompts/get,
resources/read and completion forwarded to the upstream; the source's toolsets applied; the upstream's
prompts list_changed relayed to the gateway's clients (gateway.sources.mcp_content)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import PromptsListChanged
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS
from mcp_upstreams import Upstream, gateway_serving, until_async, upstream

from gateway.settings import ApiKey, hash_key

DECLARED = """
resources:
  - {uri: "config://app", name: taken, text: the declared one comes first}
"""
KEY = "docs-key-0123456789abcdef"


def source_yaml(url: str, extra: str = "") -> str:
    return f"sources:\n  - id: fm\n    prefix: fm_\n    mcp: {{url: '{url}', connect_timeout_s: 5}}\n{extra}"


@pytest.fixture(scope="module")
def fastmcp() -> Iterator[Upstream]:
    with upstream("fastmcp_content.py") as running:
        yield running


@pytest.fixture(autouse=True)
def state_dir(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_fastmcp_upstreams_prompts_and_resources_are_served_through_the_gateway(tmp_path, fastmcp, mode):
    root = tmp_path / "defs"
    root.mkdir()
    (root / "up.yaml").write_text(source_yaml(fastmcp.url))
    with gateway_serving(root) as served:
        async with Client(f"{served.url}/mcp", mode=mode) as client:
            tools = [tool.name for tool in (await client.list_tools()).tools]
            prompts = (await client.list_prompts()).prompts
            assert tools == ["fm_add"] and [(p.name, p.description) for p in prompts] == [
                ("fm_review", "Ask for a review of some code.")]
            assert [a.name for a in prompts[0].arguments] == ["code"]
            got = await client.get_prompt("fm_review", {"code": "x = 1"})
            assert got.messages[0].content.text == "Please review this code:\nx = 1"

            resources = (await client.list_resources()).resources
            assert [(str(r.uri), r.mime_type) for r in resources] == [("config://app", "application/json")]
            templates = (await client.list_resource_templates()).resource_templates
            assert [t.uri_template for t in templates] == ["users://{user_id}/profile"]
            read = (await client.read_resource("config://app")).contents[0]
            assert (str(read.uri), read.text) == ("config://app", '{"theme": "dark"}')
            read = (await client.read_resource("users://ada/profile")).contents[0]
            assert (str(read.uri), read.text) == ("users://ada/profile", "profile of ada")

            with pytest.raises(MCPError) as caught:  # the upstream's own refusal, as it said it
                await client.get_prompt("fm_review", {})
            assert caught.value.error.code == INVALID_PARAMS
            with pytest.raises(MCPError) as caught:
                await client.read_resource("users://ada/nothing")
            assert caught.value.error.code == -32002


async def test_a_declared_resource_keeps_its_uri_and_a_sources_toolsets_apply(tmp_path, fastmcp):
    root = tmp_path / "defs"
    root.mkdir()
    (root / "up.yaml").write_text(source_yaml(fastmcp.url, "    toolsets: [docs]\n"))
    (root / "declared.yaml").write_text(DECLARED)
    keys = (ApiKey("docs", hash_key(KEY), toolsets=("docs",)), ApiKey("misc", hash_key("misc-" + KEY),
                                                                      toolsets=("misc",)))
    with gateway_serving(root, api_keys=keys) as served:
        warnings = [str(w) for w in served.gateway.catalog.warnings]
        assert any("its resource 'config://app' is not served: the name is taken (by declared.yaml:3:5)" in w
                   for w in warnings), warnings
        for key, prompts in ((KEY, ["fm_review"]), ("misc-" + KEY, [])):
            async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http, \
                    Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as client:
                assert [p.name for p in (await client.list_prompts()).prompts] == prompts
                templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
                assert templates == (["users://{user_id}/profile"] if prompts else [])
                # The declared resource (no toolsets) is seen by neither restricted key, as a tool would not be.
                assert [str(r.uri) for r in (await client.list_resources()).resources] == []


async def test_an_upstreams_prompt_list_change_reaches_a_listening_client(tmp_path):
    with upstream("mcpserver_content.py") as sdk:
        root = tmp_path / "defs"
        root.mkdir()
        (root / "up.yaml").write_text(source_yaml(sdk.url))
        with gateway_serving(root) as served:
            events: list[Any] = []
            async with Client(f"{served.url}/mcp") as client, \
                    client.listen(prompts_list_changed=True) as subscription:
                assert [p.name for p in (await client.list_prompts()).prompts] == ["fm_hello"]
                assert (await client.read_resource("memo://first")).contents[0].text == "first memo"

                async def collect() -> None:
                    async for event in subscription:
                        events.append(event)

                async with anyio.create_task_group() as group:
                    group.start_soon(collect)
                    assert (await client.call_tool("fm_grow_prompt", {"name": "grown"})).content[0].text == \
                        "grew grown"
                    await until_async(lambda: any(isinstance(e, PromptsListChanged) for e in events),
                                      "PromptsListChanged relayed from the upstream")
                    group.cancel_scope.cancel()
                names = [p.name for p in (await client.list_prompts()).prompts]
                assert names == ["fm_hello", "fm_grown"]
                assert (await client.get_prompt("fm_grown")).messages[0].content.text == "I am grown"


async def test_an_upstream_that_never_answers_a_get_or_a_read_blocks_nothing(tmp_path):
    """prompts/get and resources/read of an upstream that never answers end in an error after its
    connect_timeout_s, while other requests are answered; a template beyond level 1 is listed but matches no
    read; more resources than source_max_tools are refused whole (a warning), its tools still served."""
    with upstream("hostile_content_http.py", "1") as hostile, upstream("hostile_content_http.py", "5") as many:
        root = tmp_path / "defs"
        root.mkdir()
        (root / "up.yaml").write_text(
            f"sources:\n  - id: h\n    prefix: h_\n    mcp: {{url: '{hostile.url}', connect_timeout_s: 1}}\n"
            f"  - id: m\n    prefix: m_\n    mcp: {{url: '{many.url}', connect_timeout_s: 1}}\n")
        with gateway_serving(root, source_max_tools=3) as served:
            warnings = [str(w) for w in served.gateway.catalog.warnings]
            assert any("source 'm': its prompts and resources are not served: it lists more than 3 resources "
                       "(source_max_tools)" in w for w in warnings), warnings
            async with Client(f"{served.url}/mcp") as client:
                assert [t.name for t in (await client.list_tools()).tools] == ["h_fine", "m_fine"]
                assert [p.name for p in (await client.list_prompts()).prompts] == ["h_stuck"]
                templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
                assert templates == ["stuck://{a}{b}"]
                outcomes: list[Any] = []

                async def stuck(ask: Any) -> None:
                    try:
                        outcomes.append(await ask)
                    except MCPError as exc:
                        outcomes.append(exc)

                async with anyio.create_task_group() as group:
                    group.start_soon(stuck, client.get_prompt("h_stuck"))
                    group.start_soon(stuck, client.read_resource("stuck://0"))
                    # Meanwhile the gateway answers everything else.
                    assert (await client.call_tool("h_fine", {})).content[0].text == "fine"
                    assert [str(r.uri) for r in (await client.list_resources()).resources] == ["stuck://0"]
                assert len(outcomes) == 2 and all(isinstance(o, MCPError) for o in outcomes), outcomes
                with pytest.raises(MCPError) as caught:  # the ambiguous template matches nothing
                    await client.read_resource("stuck://xy")
                assert caught.value.error.code == -32002
