"""Prompts, resources and completion on ``/mcp``: the SDK's handlers for them, fed by ``Catalog.content``.

- ``prompts/list``, ``resources/list``, ``resources/templates/list``: what the caller may see, by the same rule as
  tools (an API key sees an entry with no toolsets, or one of its own). Short lists: one page each.
- ``prompts/get``: a missing required argument or one the prompt does not declare is invalid params, naming it.
- ``resources/read``: a fixed uri, or one of a resource template's; an unknown uri is -32002 (MCP's "resource not
  found") with the uri as data; a failed HTTP read is an internal error saying why, never a hang (the binding's
  timeout bounds it).
- ``resources/subscribe`` / ``unsubscribe`` (2025-11-25 sessions): per session, for resources declared
  ``subscribe: true``, at most ``MAX_SUBSCRIPTIONS`` each. A reload that changes such a resource's content sends
  ``notifications/resources/updated`` to its subscribers (2026-07-28 listen streams get it from the bus).
- ``completion/complete``: the declared values of a prompt argument or a resource template variable that start
  with what the client typed, at most 100.
- An ``mcp`` source's prompts and resources (``gateway.sources.mcp_content``) answer through the same handlers:
  get, read and complete are forwarded; the upstream's JSON-RPC errors come back as it sent them.
- A reload that changes the prompts' or the resources' listing says ``list_changed`` for them, as for tools.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated, SubscriptionBus
from mcp.shared.exceptions import MCPError

from ...catalog.prompts import PromptArgumentsInvalid, PromptFailed
from ...catalog.resources import MAX_COMPLETIONS, ResourceFailed
from ...catalog.snapshot import Catalog, Content
from ...context import CallContext
from ...errors import GatewayError
from ...upstream.mcp.client import UpstreamUnavailable
from ..http.auth import SCOPE_KEY, Caller
from .messages import INVALID_PARAMS

RESOURCE_NOT_FOUND = -32002  # MCP's code for a read of a uri the server does not have
INTERNAL_ERROR = -32603
# Listings and reads are per caller (toolsets) and change with any reload, which listen streams hear of.
CACHE_HINTS = {method: (0, "private") for method in
               ("prompts/list", "resources/list", "resources/templates/list", "resources/read")}
COMPLETE = {"resultType": "complete"}  # what a 2026-07-28 result says it is (dropped on 2025-11-25)
MAX_SUBSCRIPTIONS = 1000  # per session: what a client may make the gateway remember


class McpContent:
    """The handlers of one SDK server, and the subscriptions of its sessions."""

    def __init__(self, gateway: Any, bus: SubscriptionBus):
        self.gateway = gateway
        self.bus = bus
        self.seen: Catalog = gateway.catalog  # the catalog the last change was told about
        self.subscribed: dict[Any, set[str]] = {}  # the SDK's Connection -> the uris it subscribed to

    def _content(self, ctx: ServerRequestContext[Any]) -> tuple[Content, Caller]:
        return self.gateway.catalog.content, ctx.request.scope[SCOPE_KEY]

    async def list_prompts(self, ctx: ServerRequestContext[Any], params: Any) -> dict[str, Any]:
        content, caller = self._content(ctx)
        return {**COMPLETE, "prompts": [p.entry() for p in content.prompts.values() if caller.may_see(p.toolsets)]}

    async def list_resources(self, ctx: ServerRequestContext[Any], params: Any) -> dict[str, Any]:
        content, caller = self._content(ctx)
        return {**COMPLETE, "resources": [r.entry() for r in content.resources.values()
                              if r.template is None and caller.may_see(r.toolsets)]}

    async def list_resource_templates(self, ctx: ServerRequestContext[Any], params: Any) -> dict[str, Any]:
        content, caller = self._content(ctx)
        return {**COMPLETE, "resourceTemplates": [r.entry() for r in content.resources.values()
                                      if r.template is not None and caller.may_see(r.toolsets)]}

    async def get_prompt(self, ctx: ServerRequestContext[Any], params: Any) -> dict[str, Any]:
        content, caller = self._content(ctx)
        prompt = content.prompts.get(params.name)
        if prompt is None or not caller.may_see(prompt.toolsets):
            known = [p.id for p in content.prompts.values() if caller.may_see(p.toolsets)]
            raise MCPError(INVALID_PARAMS, f"Unknown prompt '{params.name[:64]}' (prompts: "
                                           f"{', '.join(known[:20]) or 'none'}).")
        try:
            return {**COMPLETE, **await prompt.answer(params.arguments, _context(ctx, caller))}
        except PromptArgumentsInvalid as exc:
            raise MCPError(INVALID_PARAMS, f"{exc}.") from None
        except (PromptFailed, UpstreamUnavailable) as exc:
            raise MCPError(INTERNAL_ERROR, f"prompt '{prompt.id}': {exc}") from None

    async def read_resource(self, ctx: ServerRequestContext[Any], params: Any) -> dict[str, Any]:
        content, caller = self._content(ctx)
        uri = str(params.uri)
        found = content.resource_for(uri)
        if found is None or not caller.may_see(found[0].toolsets):
            raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri[:200]}", {"uri": uri[:200]})
        resource, variables = found
        try:
            return {**COMPLETE, "contents": await resource.read(uri, variables, _context(ctx, caller))}
        except (ResourceFailed, GatewayError, UpstreamUnavailable) as exc:
            raise MCPError(INTERNAL_ERROR, f"reading {uri[:200]} failed: {exc}") from None

    async def subscribe(self, ctx: ServerRequestContext[Any], params: Any) -> dict[str, Any]:
        content, caller = self._content(ctx)
        uri = str(params.uri)
        resource = content.resources.get(uri)
        if resource is None or resource.template is not None or not caller.may_see(resource.toolsets):
            raise MCPError(RESOURCE_NOT_FOUND, f"Resource not found: {uri[:200]}", {"uri": uri[:200]})
        if not resource.subscribable:
            raise MCPError(INVALID_PARAMS, f"Resource {uri[:200]} cannot be subscribed to (it is not declared "
                                           "with subscribe: true).")
        connection = ctx.session._connection  # see SdkServer.track_connection
        uris = self.subscribed.get(connection)
        if uris is None:
            uris = self.subscribed[connection] = set()
            connection.exit_stack.callback(self.subscribed.pop, connection, None)
        if uri not in uris and len(uris) >= MAX_SUBSCRIPTIONS:
            raise MCPError(INVALID_PARAMS, f"At most {MAX_SUBSCRIPTIONS} subscriptions per session.")
        uris.add(uri)
        return {}

    async def unsubscribe(self, ctx: ServerRequestContext[Any], params: Any) -> dict[str, Any]:
        self.subscribed.get(ctx.session._connection, set()).discard(str(params.uri))
        return {}

    async def complete(self, ctx: ServerRequestContext[Any], params: Any) -> dict[str, Any]:
        content, caller = self._content(ctx)
        ref, argument = params.ref, params.argument
        if ref.type == "ref/prompt":
            prompt = content.prompts.get(ref.name)
            if prompt is None or not caller.may_see(prompt.toolsets):
                raise MCPError(INVALID_PARAMS, f"Unknown prompt '{ref.name[:64]}'.")
            completing = prompt.completions(argument.name, argument.value)
        else:
            resource = content.resources.get(ref.uri)
            if resource is None or resource.template is None or not caller.may_see(resource.toolsets):
                raise MCPError(INVALID_PARAMS, f"Unknown resource template '{ref.uri[:200]}'.")
            completing = resource.completions(argument.name, argument.value)
        try:
            values = await completing
        except UpstreamUnavailable as exc:
            raise MCPError(INTERNAL_ERROR, str(exc)) from None
        return {**COMPLETE, "completion": {"values": values[:MAX_COMPLETIONS], "total": len(values),
                               "hasMore": len(values) > MAX_COMPLETIONS}}

    async def catalog_changed(self, connections: Iterable[Any]) -> None:
        """Tell sessions and listen streams what of the prompts and resources a reload changed."""
        before, after = self.seen.content, self.gateway.catalog.content
        self.seen = self.gateway.catalog
        prompts_changed = _listing(before.prompts) != _listing(after.prompts)
        resources_changed = _listing(before.resources) != _listing(after.resources)
        updated = [uri for uri, resource in after.resources.items()
                   if uri in before.resources and before.resources[uri].digest != resource.digest]
        async with anyio.create_task_group() as group:
            for connection in list(connections):
                if prompts_changed:
                    group.start_soon(connection.send_prompt_list_changed)
                if resources_changed:
                    group.start_soon(connection.send_resource_list_changed)
                for uri in self.subscribed.get(connection, set()).intersection(updated):
                    group.start_soon(connection.send_resource_updated, uri)
        if prompts_changed:
            await self.bus.publish(PromptsListChanged())
        if resources_changed:
            await self.bus.publish(ResourcesListChanged())
        for uri in updated:
            await self.bus.publish(ResourceUpdated(uri))


def _context(ctx: ServerRequestContext[Any], caller: Caller) -> CallContext:
    return CallContext(user=caller.user(ctx.request.headers.get("x-user")), surface="mcp",
                       tool_call_id=str(ctx.request_id), **caller.who())


def _listing(entries: dict[str, Any]) -> list[Any]:
    return [(entry.entry(), entry.toolsets) for entry in entries.values()]
