"""MCP clients hear about reloads: ``notifications/tools/list_changed`` for a real change, nothing otherwise."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ToolsListChanged
from mcp.types import ToolListChangedNotification
from reload_support import break_then_restore, tool_yaml, until, write

from gateway.catalog.snapshot import Catalog


async def test_mcp_session_hears_list_changed_for_valid_edits_only(defs, serve):
    """A 2025-11-25 session gets tools/list_changed after a valid edit and then lists the new tool; an invalid
    edit, a rebuild back to the served content and a same-bytes rewrite send nothing."""
    served = serve(defs)
    changes: list[str] = []  # versions the server announced, as its gateway's listeners heard them

    async def server_side(catalog: Catalog) -> None:
        changes.append(catalog.version)

    served.gateway.on_change(server_side)
    heard: list[Any] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ToolListChangedNotification):
            heard.append(message)

    async with streamable_http_client(f"{served.url}/mcp") as (read, write_stream), \
            ClientSession(read, write_stream, message_handler=on_message) as session:
        await session.initialize()
        # The session's GET stream opens in the background after the handshake, and a notification sent before
        # it is up has nowhere to go: edit until one arrives, then count from there.
        for attempt in range(20):
            write(defs / "main.yaml", tool_yaml("echo", f"warmup{attempt}"))
            await until(lambda attempt=attempt: len(changes) > attempt, "the warm-up rebuild")
            try:
                await until(lambda: heard, "a first notification", timeout=2)
                break
            except AssertionError:
                continue
        await until(lambda: len(heard) == len(changes), "the warm-up notifications")
        heard_before, changes_before = len(heard), len(changes)

        write(defs / "main.yaml", tool_yaml("echo", "fresh"))
        await until(lambda: len(heard) == heard_before + 1, "tools/list_changed after a valid edit")
        listed = {tool.name for tool in (await session.list_tools()).tools}
        assert "fresh" in listed and not any(name.startswith("warmup") for name in listed)
        valid = (defs / "main.yaml").read_text()

        gateway = served.gateway
        await break_then_restore(gateway, defs / "main.yaml", valid)
        seen = gateway.last_reload.at
        write(defs / "main.yaml", valid)  # the same bytes again
        await until(lambda: gateway.last_reload.at > seen, "the same-bytes rebuild")
        assert not gateway.last_reload.changed

        write(defs / "main.yaml", tool_yaml("echo", "fresh", "after"))
        await until(lambda: len(heard) >= heard_before + 2, "tools/list_changed after the next valid edit")
        assert "after" in {tool.name for tool in (await session.list_tools()).tools}
    # Every notification the session got was for a change the server made, and only the two valid edits made any.
    assert len(changes) == changes_before + 2
    assert len(heard) == heard_before + 2


async def test_listening_client_gets_tools_list_changed_for_valid_edits_only(defs, serve):
    """A 2026-07-28 client listening with subscriptions/listen gets one ToolsListChanged per valid edit and then
    lists the new tool; an invalid edit and a rebuild back to the served content send nothing."""
    served = serve(defs)
    changes: list[str] = []

    async def server_side(catalog: Catalog) -> None:
        changes.append(catalog.version)

    served.gateway.on_change(server_side)
    events: list[Any] = []
    async with Client(f"{served.url}/mcp") as client, client.listen(tools_list_changed=True) as subscription:

        async def collect() -> None:
            async for event in subscription:
                events.append(event)

        async with anyio.create_task_group() as group:
            group.start_soon(collect)
            write(defs / "main.yaml", tool_yaml("echo", "fresh"))
            await until(lambda: len(events) == 1, "ToolsListChanged after a valid edit")
            assert isinstance(events[0], ToolsListChanged)
            assert "fresh" in {tool.name for tool in (await client.list_tools()).tools}
            valid = (defs / "main.yaml").read_text()

            await break_then_restore(served.gateway, defs / "main.yaml", valid)

            write(defs / "main.yaml", tool_yaml("echo", "fresh", "after"))
            await until(lambda: len(events) >= 2, "ToolsListChanged after the next valid edit")
            assert "after" in {tool.name for tool in (await client.list_tools()).tools}
            group.cancel_scope.cancel()
    assert len(changes) == 2 and len(events) == 2
