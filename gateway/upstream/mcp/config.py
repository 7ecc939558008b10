"""How to reach one upstream MCP server, as a ``sources: [{mcp: {...}}]`` entry declares it.

    url                 streamable HTTP endpoint (http or https)
    headers             sent with every request; values may name secrets: ``Bearer {{ secrets.TOKEN }}``
    command, args       a stdio server the gateway spawns (and stops when it closes)
    env                 added to the spawned server's environment (values may name secrets)
    cwd                 its working directory
    connect_timeout_s   how long connecting and listing the tools may take (default 5 s)
    reconnect_floor_s   the shortest wait between two attempts to connect (default 0.5 s)
    reconnect_cap_s     the longest (default 30 s); see ``UpstreamConfig.reconnect_delay``
    relist_s            how often an upstream that tells no list changes is listed again (default 60 s)
    auth                ``oauth``, or ``{oauth: {...}}``: OAuth 2.1 to an upstream that demands it
                        (``gateway.upstream.oauth``; its secrets are filled in when a token is asked for)
    person_auth         ``{token_exchange | authorization_code: {...}}``: each call in the calling person's own
                        session, with their token (``gateway.bindings.mcp`` gets it, ``McpPool.person`` keeps the
                        sessions); the listing stays the gateway's own (headers, auth)

An ``UpstreamConfig`` is the key of the pooled session (``gateway.upstream.mcp.pool``): the values as written, so a changed
declaration is a new session and an unchanged one keeps its session across reloads. Secrets are resolved when a
connection is made, never stored here, and never part of a message.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ... import secrets as secret_store
from ...templates.compile import Compiled, TemplateInvalid, compile_value
from ..oauth import config as oauth_config

if TYPE_CHECKING:
    from ...settings import Settings

DEFAULT_CONNECT_TIMEOUT_S = 5.0
DEFAULT_RECONNECT_FLOOR_S = 0.5
DEFAULT_RECONNECT_CAP_S = 30.0
# How often an upstream that tells no list changes (no tools.listChanged, or a refused listen stream) is listed
# again to find them: FastMCP 4 says listChanged false; listening anyway and reconnecting on the refusal cost
# two reconnects a second, forever.
DEFAULT_RELIST_S = 60.0
# The HTTP statuses of an upstream refusing the gateway's credentials (the source's headers): `validate` fails on
# them, where a down upstream is only a warning.
CREDENTIALS_REFUSED = frozenset({401, 403})
NO_PERSON_ON_STDIO = "a person's token is sent over HTTP: a stdio server ('command') serves no one but the gateway"
TEMPLATE_NAMES = frozenset({"secrets"})  # a connection has no call arguments or context to read


@dataclass(frozen=True)
class ListingBounds:
    """What one upstream's listing may bring (the settings ``source_max_tools``, ``source_max_bytes``,
    ``source_max_depth``): ``tools`` in all, ``bytes`` per tools/list answer, ``depth`` of a tool's schemas.
    Counted page by page, so that a listing past them is refused at the page that passes them, not read and
    parsed whole first."""

    tools: int
    bytes: int
    depth: int

    def too_many(self, label: str) -> str:
        return (f"{label} lists more than {self.tools:,} tools, the bound of setting source_max_tools: raise it to "
                "serve this source")

    def too_big(self, label: str) -> str:
        return (f"{label} answered tools/list with more than {self.bytes:,} bytes, the bound of setting "
                "source_max_bytes: raise it to serve this source")

    def too_deep(self, label: str, tool: str, problem: str) -> str:
        return (f"{label} lists tool '{tool}' whose schema is no schema to serve: {problem} (the bound of setting "
                "source_max_depth: raise it to serve this source)")


@dataclass(frozen=True)
class UpstreamConfig:
    source: str  # the id of the source that declares it: every message names the upstream by it
    bounds: ListingBounds
    url: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cwd: str | None = None
    connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S
    relay: bool = True  # what it sends during a call goes to the calling client (gateway.upstream.mcp.relay)
    reconnect_floor_s: float = DEFAULT_RECONNECT_FLOOR_S
    reconnect_cap_s: float = DEFAULT_RECONNECT_CAP_S
    relist_s: float = DEFAULT_RELIST_S
    oauth: oauth_config.OAuthClient | None = None

    def reconnect_delay(self, failures: int) -> float:
        """The wait before the next attempt to connect after ``failures`` attempts in a row that failed, or whose
        session did not stay up ``reconnect_cap_s``: the floor doubling up to the cap, drawn from its upper half
        (jitter: gateways that lost one upstream together do not come back together), never under the floor. An
        upstream that accepts a session and drops it at once is asked at most once per cap, not in a loop."""
        wait = min(self.reconnect_floor_s * 2 ** min(max(failures - 1, 0), 30), self.reconnect_cap_s)
        return max(self.reconnect_floor_s, wait * (0.5 + random.random() / 2))

    @property
    def transport(self) -> str:
        return "http" if self.url is not None else "stdio"

    @property
    def target(self) -> str:
        """Where it is, for people: the URL without credentials or query, or the command."""
        if self.url is not None:
            parts = urlsplit(self.url)
            return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}{parts.path}"
        return " ".join([self.command or "", *self.args]).strip()

    @property
    def label(self) -> str:
        return f"MCP server '{self.source}' ({self.target})"

    @property
    def identity(self) -> str:
        """What names this upstream's copy on disk (``gateway.sources.cache``): where it is, not its secrets."""
        return self.url if self.url is not None else "\0".join([self.command or "", *self.args, self.cwd or ""])

    def for_a_person(self) -> UpstreamConfig:
        """This config as a person's session sends it (``person_auth``): without ``Authorization`` (the person's
        token takes its place) nor any header naming a secret — the gateway's credentials are never sent for a
        person."""
        kept = tuple((name, value) for name, value in self.headers if name.lower() != "authorization"
                     and not compile_value(value, TEMPLATE_NAMES).references.secrets)
        return replace(self, headers=kept, oauth=None)

    def secret_names(self) -> frozenset[str]:
        return _compiled(self).references.secrets

    def rendered(self) -> tuple[dict[str, str], dict[str, str]]:
        """(headers, env) with their secrets filled in; ``SecretsMissing`` names any that is not set."""
        compiled = _compiled(self)
        values = secret_store.resolve(compiled.references.secrets)
        rendered = compiled.render({"secrets": values})
        return ({k: str(v) for k, v in rendered["headers"].items()}, {k: str(v) for k, v in rendered["env"].items()})

    def oauth_secrets(self) -> dict[str, str]:
        """The OAuth client's declared values (client_id, client_secret, private_key) with their secrets filled
        in."""
        compiled = _compiled(self)
        rendered = compiled.render({"secrets": secret_store.resolve(compiled.references.secrets)})
        return {k: str(v) for k, v in rendered["oauth"].items()}


def _compiled(config: UpstreamConfig) -> Compiled:
    oauth = config.oauth.templates if config.oauth is not None else {}
    return compile_value({"headers": dict(config.headers), "env": dict(config.env), "oauth": oauth}, TEMPLATE_NAMES)


def parse_config(source: str, spec: Mapping[str, Any], settings: Settings
                 ) -> tuple[UpstreamConfig | None, list[tuple[tuple[str, ...], str]]]:
    """The config of an ``mcp:`` mapping (already schema-checked), or None and every problem as (path, message)."""
    problems: list[tuple[tuple[str, ...], str]] = []
    url, command = spec.get("url"), spec.get("command")
    if (url is None) == (command is None):
        problems.append(((), "give either 'url' (streamable HTTP) or 'command' (stdio), not both or neither"))
    if url is not None and urlsplit(str(url)).scheme.lower() not in ("http", "https"):
        problems.append((("url",), f"'{url}' is not an http(s) URL"))
    if url is None and spec.get("headers"):
        problems.append((("headers",), "headers are sent over HTTP: a stdio server ('command') takes 'env'"))
    if command is None and (spec.get("args") or spec.get("env") or spec.get("cwd")):
        problems.append(((), "args, env and cwd describe a stdio server: give 'command' with them"))
    oauth = None
    if spec.get("auth") is not None:
        oauth, refused = oauth_config.parse(spec["auth"])
        problems += [(("auth", *path), message) for path, message in refused]
        if url is None:
            problems.append((("auth",), "OAuth is spoken over HTTP: a stdio server ('command') takes 'env'"))
    if spec.get("person_auth") is not None and url is None:
        problems.append((("person_auth",), NO_PERSON_ON_STDIO))
    config = UpstreamConfig(
        source=source,
        bounds=ListingBounds(settings.source_max_tools, settings.source_max_bytes, settings.source_max_depth),
        url=str(url) if url is not None else None,
        headers=tuple((str(k), str(v)) for k, v in (spec.get("headers") or {}).items()),
        command=str(command) if command is not None else None,
        args=tuple(str(a) for a in spec.get("args") or ()),
        env=tuple((str(k), str(v)) for k, v in (spec.get("env") or {}).items()),
        cwd=str(spec["cwd"]) if spec.get("cwd") is not None else None,
        connect_timeout_s=float(spec.get("connect_timeout_s", DEFAULT_CONNECT_TIMEOUT_S)),
        relay=spec.get("relay", True) is not False,
        reconnect_floor_s=float(spec.get("reconnect_floor_s", DEFAULT_RECONNECT_FLOOR_S)),
        reconnect_cap_s=float(spec.get("reconnect_cap_s", DEFAULT_RECONNECT_CAP_S)),
        relist_s=float(spec.get("relist_s", DEFAULT_RELIST_S)),
        oauth=oauth,
    )
    if config.reconnect_floor_s > config.reconnect_cap_s:
        longer = (f"reconnect_floor_s ({config.reconnect_floor_s:g}) is longer than reconnect_cap_s "
                  f"({config.reconnect_cap_s:g})")
        problems.append((("reconnect_floor_s",), longer))
    try:
        compiled = _compiled(config)
    except TemplateInvalid as exc:
        problems += [(tuple(str(p) for p in path), message) for path, message in exc.problems]
        return None, problems
    for name in sorted(compiled.references.secrets):
        refused = secret_store.refusal(name, settings)
        if refused is not None:
            problems.append(((), refused))
    return (None if problems else config), problems
