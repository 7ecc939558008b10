"""MCP clients hear about reloads of prompts and resources: ``notifications/resources/updated`` for a subscribed
resource whose file changed, and ``list_changed`` for prompts and resources whose listing changed, on a
2025-11-25 session and on a 2026-07-28 listen stream (gateway.server.mcp.content)."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import PromptsListChanged, ResourceUpdated
from mcp.types import PromptListChangedNotification, ResourceListChangedNotification, ResourceUpdatedNotification
from reload_support import until, write

CONTENT = """
resources:
  - {{uri: "test://watched", name: watched, file: watched.txt, subscribe: true}}
  - {{uri: "test://other", name: other, file: other.txt, subscribe: true}}
prompts:
{prompts}
"""
PROMPT = "  - {{id: {id}, description: d, messages: [{{role: user, text: hi}}]}}\n"


def content(*prompts: str) -> str:
    return CONTENT.format(prompts="".join(PROMPT.format(id=p) for p in prompts) or "  []")


async def test_a_session_hears_updates_of_what_it_subscribed_to_and_list_changes(defs, serve):
    write(defs / "watched.txt", "v0")
    write(defs / "other.txt", "o0")
    write(defs / "content.yaml", content("first"))
    served = serve(defs)
    heard: list[Any] = []

    async def on_message(message: Any) -> None:
        heard.append(message)

    def updates() -> list[str]:
        return [str(m.params.uri) for m in heard if isinstance(m, ResourceUpdatedNotification)]

    async with streamable_http_client(f"{served.url}/mcp") as (read, write_stream), \
            ClientSession(read, write_stream, message_handler=on_message) as session:
        init = await session.initialize()
        assert init.capabilities.resources.subscribe is True and init.capabilities.resources.list_changed is True
        assert init.capabilities.prompts.list_changed is True
        await session.subscribe_resource("test://watched")
        # The session's GET stream opens in the background after the handshake: edit until an update arrives.
        for attempt in range(20):
            write(defs / "watched.txt", f"warmup{attempt}")
            try:
                await until(lambda: updates(), "a first update", timeout=2)
                break
            except AssertionError:
                continue
        assert set(updates()) == {"test://watched"}  # never the other file's, which it did not subscribe to
        assert not any(isinstance(m, PromptListChangedNotification) for m in heard)  # only a file changed
        assert (await session.read_resource("test://watched")).contents[0].text.startswith("warmup")

        count = len(updates())
        write(defs / "content.yaml", content("first", "second"))  # a prompt more: prompts list_changed
        await until(lambda: any(isinstance(m, PromptListChangedNotification) for m in heard), "prompts list_changed")
        assert [p.name for p in (await session.list_prompts()).prompts] == ["first", "second"]
        assert not any(isinstance(m, ResourceListChangedNotification) for m in heard)  # resources are the same

        write(defs / "other.txt", "o1")  # changed, but not subscribed to
        write(defs / "watched.txt", "v2")
        await until(lambda: len(updates()) > count, "the update of the watched file")
        assert set(updates()) == {"test://watched"}
        assert await session.unsubscribe_resource("test://watched") is not None


async def test_a_listen_stream_hears_resource_updates_and_prompt_list_changes(defs, serve):
    write(defs / "watched.txt", "v0")
    write(defs / "other.txt", "o0")
    write(defs / "content.yaml", content("first"))
    served = serve(defs)
    events: list[Any] = []
    async with Client(f"{served.url}/mcp") as client, \
            client.listen(prompts_list_changed=True, resource_subscriptions=["test://watched"]) as subscription:
        assert client.server_capabilities.resources.subscribe is True

        async def collect() -> None:
            async for event in subscription:
                events.append(event)

        async with anyio.create_task_group() as group:
            group.start_soon(collect)
            write(defs / "other.txt", "o1")
            write(defs / "watched.txt", "v1")
            await until(lambda: any(isinstance(e, ResourceUpdated) for e in events), "ResourceUpdated")
            assert [e.uri for e in events if isinstance(e, ResourceUpdated)] == ["test://watched"]
            write(defs / "content.yaml", content("first", "second"))
            await until(lambda: any(isinstance(e, PromptsListChanged) for e in events), "PromptsListChanged")
            group.cancel_scope.cancel()
