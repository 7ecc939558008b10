"""Prompts, resources and completion on /mcp with the official SDK's Client, on both revisions: listings,
prompts/get, resources/read (text, blob, a template, an HTTP binding), completion, the toolset rule, errors
(gateway.server.mcp.content)."""

from __future__ import annotations

import base64

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, PromptReference, ResourceTemplateReference
from server_support import running
from support import CONSOLE

from gateway.settings import ApiKey, hash_key

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\xff"
DEFINITIONS = """
prompts:
  - id: greet
    name: Greeting
    description: Greets someone
    arguments:
      - {name: who, description: Who to greet, required: true, completions: [paris, park, party, rome]}
    messages:
      - {role: user, text: "Hello {{ args.who }}"}
      - {role: user, image: {file: p.png, mime_type: image/png}}
  - {id: secret_prompt, description: For ops only, toolsets: [ops], messages: [{role: user, text: hi}]}
resources:
  - {uri: "test://note", name: note, description: A note, file: note.txt, subscribe: true}
  - {uri: "test://bin", name: bin, file: p.png, mime_type: image/png}
  - {uri: "test://ops", name: ops, text: ops only, toolsets: [ops]}
  - uri: "test://template/{id}/data"
    name: tmpl
    mime_type: application/json
    text: '{"id": "{{ args.id }}"}'
    completions: {id: ["123", "124", "200"]}
  - uri: "demo://stations/{station_id}"
    name: station
    mime_type: application/json
    binding: {http: {url: "{{ gateway.base_url }}/demo/stations/{{ args.station_id }}"}}
"""
REVISIONS = ["legacy", "auto"]  # 2025-11-25 (initialize handshake) and 2026-07-28
OPS_KEY, OTHER_KEY = "ops-key-0123456789abcdef", "other-key-0123456789abcdef"


def write(root, base_url: str = "http://127.0.0.1:9") -> None:
    root.mkdir(exist_ok=True)
    (root / "p.png").write_bytes(PNG)
    (root / "note.txt").write_text("hello note\n")
    (root / "defs.yaml").write_text(DEFINITIONS.replace("{{ gateway.base_url }}", base_url))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("prompts") / "defs"
    write(root)
    with running(root) as server:
        write(root, server.url)  # the http resource reads this server's own /demo API
        assert httpx.post(f"{server.url}/admin/reload", auth=CONSOLE).json()["changed"] is True
        yield server


@pytest.mark.parametrize("mode", REVISIONS)
async def test_prompts_and_resources_are_listed_and_served_on_both_revisions(served, mode):
    async with Client(f"{served.url}/mcp", mode=mode) as client:
        assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
        capabilities = client.server_capabilities
        assert capabilities.prompts is not None and capabilities.resources is not None
        assert capabilities.completions is not None
        prompts = (await client.list_prompts()).prompts
        assert [(p.name, p.title, [a.name for a in p.arguments or []]) for p in prompts] == [
            ("greet", "Greeting", ["who"]), ("secret_prompt", None, [])]  # auth off: every toolset
        got = await client.get_prompt("greet", {"who": "{{ 6*7 }}"})
        assert got.messages[0].content.text == "Hello {{ 6*7 }}" and got.messages[0].role == "user"
        assert base64.b64decode(got.messages[1].content.data) == PNG
        assert got.messages[1].content.mime_type == "image/png"

        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        assert set(resources) == {"test://note", "test://bin", "test://ops"}
        assert resources["test://note"].description == "A note" and resources["test://bin"].mime_type == "image/png"
        templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
        assert templates == ["test://template/{id}/data", "demo://stations/{station_id}"]
        assert (await client.read_resource("test://note")).contents[0].text == "hello note\n"
        assert base64.b64decode((await client.read_resource("test://bin")).contents[0].blob) == PNG
        read = (await client.read_resource("test://template/42/data")).contents[0]
        assert (str(read.uri), read.mime_type, read.text) == ("test://template/42/data", "application/json",
                                                              '{"id": "42"}')
        station = (await client.read_resource("demo://stations/valencia")).contents[0]
        assert '"name": "Val' in station.text and station.mime_type == "application/json"

        completed = await client.complete(PromptReference(type="ref/prompt", name="greet"),
                                          {"name": "who", "value": "pa"})
        assert completed.completion.values == ["paris", "park", "party"] and completed.completion.total == 3
        completed = await client.complete(ResourceTemplateReference(type="ref/resource",
                                                                    uri="test://template/{id}/data"),
                                          {"name": "id", "value": "12"})
        assert completed.completion.values == ["123", "124"]


@pytest.mark.parametrize("mode", REVISIONS)
async def test_bad_requests_are_json_rpc_errors_that_say_what(served, mode):
    async with Client(f"{served.url}/mcp", mode=mode) as client:
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("greet", {})
        assert caught.value.error.code == INVALID_PARAMS
        assert "prompt 'greet' needs argument 'who'" in caught.value.error.message
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("greet", {"who": "x", "whom": "y"})
        assert "has no argument 'whom'" in caught.value.error.message
        with pytest.raises(MCPError) as caught:
            await client.get_prompt("nope")
        assert caught.value.error.code == INVALID_PARAMS and "Unknown prompt 'nope'" in caught.value.error.message
        with pytest.raises(MCPError) as caught:
            await client.read_resource("test://missing")
        assert caught.value.error.code == -32002 and "test://missing" in caught.value.error.message
        with pytest.raises(MCPError) as caught:  # the upstream answers 404: said, never a 500
            await client.read_resource("demo://stations/atlantis")
        assert caught.value.error.code == -32603 and "404" in caught.value.error.message
        with pytest.raises(MCPError):  # a uri past the bound is no template's
            await client.read_resource("test://template/" + "9" * 5000 + "/data")
        # A bad call blocked nothing: the session still answers.
        assert (await client.read_resource("test://note")).contents[0].text == "hello note\n"


async def test_a_key_sees_prompts_and_resources_of_its_toolsets_only(tmp_path, start_server):
    root = tmp_path / "defs"
    write(root)
    keys = (ApiKey("ops", hash_key(OPS_KEY), toolsets=("ops",)), ApiKey("other", hash_key(OTHER_KEY),
                                                                        toolsets=("misc",)))
    served = start_server(root, api_keys=keys)
    for key, prompts, resources in ((OPS_KEY, ["secret_prompt"], ["test://ops"]), (OTHER_KEY, [], [])):
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=30) as http, \
                Client(streamable_http_client(f"{served.url}/mcp", http_client=http)) as client:
            assert [p.name for p in (await client.list_prompts()).prompts] == prompts
            assert [str(r.uri) for r in (await client.list_resources()).resources] == resources
            assert (await client.list_resource_templates()).resource_templates == []
            if key == OTHER_KEY:  # what it may not see is unknown to it, exactly as a missing one
                for call in (client.get_prompt("secret_prompt"), client.read_resource("test://ops")):
                    with pytest.raises(MCPError) as caught:
                        await call
                    assert caught.value.error.code in (INVALID_PARAMS, -32002)
            else:
                assert (await client.read_resource("test://ops")).contents[0].text == "ops only"


@pytest.mark.parametrize("mode", REVISIONS)
async def test_capabilities_declare_only_what_is_served(tmp_path, start_server, mode):
    """A gateway of tools alone declares no prompts, resources or completions; once a reload adds a prompt, a
    client connecting then is told prompts (and completions), still no resources."""
    root = tmp_path / "defs"
    root.mkdir()
    (root / "tools.yaml").write_text("tools: []\n")
    served = start_server(root)
    async with Client(f"{served.url}/mcp", mode=mode) as client:
        capabilities = client.server_capabilities
        assert capabilities.tools is not None
        assert (capabilities.prompts, capabilities.resources, capabilities.completions) == (None, None, None)
    (root / "prompts.yaml").write_text("prompts: [{id: p, description: d, messages: [{role: user, text: hi}]}]\n")
    async with httpx.AsyncClient(timeout=30) as http:
        reloaded = await http.post(f"{served.url}/admin/reload", auth=CONSOLE)
    assert reloaded.json()["changed"] is True
    async with Client(f"{served.url}/mcp", mode=mode) as client:
        capabilities = client.server_capabilities
        assert capabilities.prompts is not None and capabilities.completions is not None
        assert capabilities.resources is None
        assert [p.name for p in (await client.list_prompts()).prompts] == ["p"]
