"""The prompts, resources and resource templates of ``sources: [{id, mcp: ...}]``, served beside the declared ones.

Listed when the catalog is built, after the source's tools, and only from an upstream whose tools were listed
just now (one that is down was already waited for once) and only what its capabilities declare (``prompts``,
``resources``): through the gateway's pooled session (``gateway.upstream.mcp.pool``) when it runs, else a session of the
build's own. At most ``source_max_tools`` of each kind, ``MAX_PAGES`` pages.

Namespaced like the source's tools: a prompt is served as ``prefix`` + its name. A resource keeps its URI: a URI
is already global, and the ``resource_link`` blocks of the upstream's tool results (passed through unchanged)
name it as the upstream does, so a client reading one must find it; a URI another source (or a declared resource)
took first is not served again, and a warning says so. The source's ``toolsets`` apply to them as to its tools.

prompts/get, resources/read and completion/complete are forwarded to the upstream under the upstream's own
names; its JSON-RPC errors come back as they were, and an upstream that cannot be reached is an error that says
so. An upstream's prompts or resources ``list_changed`` makes the next build list them again
(``gateway.upstream.mcp.connection``), and clients hear the change as for any reload.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import mcp_types
from mcp import Client
from mcp.shared.exceptions import MCPError

from ..context import CallContext
from ..definitions.model import SourceDeclaration
from ..definitions.uri_templates import UriTemplate, UriTemplateInvalid, parse_uri_template
from ..errors import Problem
from ..settings import Settings
from ..upstream.mcp.client import UpstreamUnavailable, connected, reason
from ..upstream.mcp.config import UpstreamConfig, parse_config

MAX_PAGES = 100
T = TypeVar("T")
_NEVER = re.compile(r"(?!)")  # the pattern of an upstream template beyond level 1: listed, never matched


@dataclass(frozen=True, eq=False)
class Origin:
    """Where forwarded requests go: the source's upstream, through the gateway's pool when it has one."""

    source: SourceDeclaration
    config: UpstreamConfig
    pool: Any  # gateway.upstream.mcp.pool.McpPool, or None where no gateway runs (the CLI)

    @property
    def toolsets(self) -> tuple[str, ...]:
        toolsets = self.source.raw.get("toolsets")
        return tuple(toolsets) if isinstance(toolsets, list) else ()

    async def request(self, ask: Callable[[Client], Awaitable[T]]) -> T:
        if self.pool is not None:
            return await self.pool.connection(self.config).request(ask)
        try:
            async with connected(self.config) as client:
                return await ask(client)
        except MCPError:
            raise
        except Exception as exc:  # noqa: BLE001 — said in words naming the upstream
            raise UpstreamUnavailable(f"{self.config.label} is unreachable: {reason(exc)}") from None


@dataclass(frozen=True, eq=False)
class UpstreamPrompt:
    origin: Origin
    id: str  # as served: the source's prefix + the upstream's name
    upstream: mcp_types.Prompt

    @property
    def toolsets(self) -> tuple[str, ...]:
        return self.origin.toolsets

    def entry(self) -> dict[str, Any]:
        return {**_dumped(self.upstream), "name": self.id}

    async def answer(self, arguments: Mapping[str, str] | None, context: CallContext) -> dict[str, Any]:
        name = self.upstream.name
        return _dumped(await self.origin.request(lambda client: client.get_prompt(name, dict(arguments or {}))))

    async def completions(self, argument: str, value: str) -> list[str]:
        ref = mcp_types.PromptReference(type="ref/prompt", name=self.upstream.name)
        result = await self.origin.request(lambda client: client.complete(ref, {"name": argument, "value": value}))
        return list(result.completion.values)


@dataclass(frozen=True, eq=False)
class UpstreamResource:
    origin: Origin
    upstream: mcp_types.Resource | mcp_types.ResourceTemplate
    template: UriTemplate | None = None
    digest: str = ""  # read from the upstream at each read: no content of its own to compare on a reload
    subscribable: bool = False

    @property
    def uri(self) -> str:
        return self.template.source if self.template else str(self.upstream.uri)  # type: ignore[union-attr]

    @property
    def toolsets(self) -> tuple[str, ...]:
        return self.origin.toolsets

    def entry(self) -> dict[str, Any]:
        return _dumped(self.upstream)

    async def read(self, uri: str, variables: Mapping[str, str], context: CallContext) -> list[dict[str, Any]]:
        result = await self.origin.request(lambda client: client.read_resource(uri))
        return _dumped(result)["contents"]

    async def completions(self, variable: str, value: str) -> list[str]:
        if self.template is None:
            return []
        ref = mcp_types.ResourceTemplateReference(type="ref/resource", uri=self.template.source)
        result = await self.origin.request(lambda client: client.complete(ref, {"name": variable, "value": value}))
        return list(result.completion.values)


@dataclass(frozen=True)
class Listed:
    prompts: list[mcp_types.Prompt]
    resources: list[mcp_types.Resource]
    templates: list[mcp_types.ResourceTemplate]


def _dumped(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def upstream_content(sources: Sequence[SourceDeclaration], healthy: set[str], settings: Settings, pool: Any
                     ) -> tuple[list[UpstreamPrompt], list[UpstreamResource], list[Problem], str]:
    """The prompts and resources of every ``mcp`` source in ``healthy`` (ids whose tools were just listed), the
    warnings met, and a digest of what was listed (part of the catalog's version)."""
    prompts: list[UpstreamPrompt] = []
    resources: list[UpstreamResource] = []
    problems: list[Problem] = []
    digest = hashlib.sha256()
    for source in sources:
        if source.kind != "mcp" or source.id not in healthy:
            continue
        config, _ = parse_config(source.id, source.settings, settings)
        if config is None:
            continue
        try:
            listed = _list_blocking(config, pool, settings.source_max_tools)
        except (UpstreamUnavailable, MCPError, TimeoutError) as exc:
            message = f"its prompts and resources are not served: {reason(exc) if isinstance(exc, MCPError) else exc}"
            problems.append(source.problem(["mcp"], message, key=True, severity="warning"))
            continue
        origin = Origin(source, config, pool)
        prefix = str(source.raw.get("prefix", ""))
        prompts += [UpstreamPrompt(origin, prefix + prompt.name, prompt) for prompt in listed.prompts]
        resources += [UpstreamResource(origin, resource) for resource in listed.resources]
        resources += [UpstreamResource(origin, template, _template(template.uri_template))
                      for template in listed.templates]
        for part in (listed.prompts, listed.resources, listed.templates):
            digest.update(json.dumps([_dumped(entry) for entry in part], sort_keys=True).encode())
        digest.update(f"\0{source.id}\0{prefix}\0{origin.toolsets}\0".encode())
    return prompts, resources, problems, digest.hexdigest()


def _template(source: str) -> UriTemplate:
    try:
        return parse_uri_template(source)
    except UriTemplateInvalid:
        return UriTemplate(source, (), _NEVER)


def _list_blocking(config: UpstreamConfig, pool: Any, most: int) -> Listed:
    """From a build's thread: through the pooled session when the pool runs on a loop, else a session of this
    thread's own, within the source's ``connect_timeout_s``."""
    loop = pool.loop if pool is not None else None
    timeout = config.connect_timeout_s
    if loop is not None and loop.is_running():
        listing = pool.connection(config).request(lambda c: _list(c, most), listing=True)
        future = asyncio.run_coroutine_threadsafe(listing, loop)
        try:
            return future.result(timeout)
        except TimeoutError:
            future.cancel()
            raise UpstreamUnavailable(f"{config.label} did not list them within {timeout:g} s") from None

    async def once() -> Listed | UpstreamUnavailable:
        async with connected(config) as client:
            try:
                return await _list(client, most)
            except UpstreamUnavailable as exc:  # a bound: returned, as the client's exit would wrap it in a group
                return exc

    try:
        listed = asyncio.run(asyncio.wait_for(once(), timeout))
    except (TimeoutError, MCPError):
        raise
    except Exception as exc:  # noqa: BLE001 — said in words naming the upstream
        raise UpstreamUnavailable(f"{config.label} is unreachable: {reason(exc)}") from None
    if isinstance(listed, UpstreamUnavailable):
        raise listed
    return listed


async def _list(client: Client, most: int) -> Listed:
    capabilities = client.server_capabilities
    prompts = await _pages(client.list_prompts, "prompts", most) if capabilities and capabilities.prompts else []
    if not (capabilities and capabilities.resources):
        return Listed(prompts, [], [])
    return Listed(prompts, await _pages(client.list_resources, "resources", most),
                  await _pages(client.list_resource_templates, "resource_templates", most))


async def _pages(ask: Callable[..., Awaitable[Any]], field: str, most: int) -> list[Any]:
    found: list[Any] = []
    cursor: str | None = None
    for _ in range(MAX_PAGES):
        page = await ask(cursor=cursor)
        found += getattr(page, field)
        if len(found) > most:
            raise UpstreamUnavailable(f"it lists more than {most} {field.replace('_', ' ')} (source_max_tools)")
        cursor = page.next_cursor
        if cursor is None:
            break
    return found
