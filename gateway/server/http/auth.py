"""Who is calling: API keys (``Authorization: Bearer <key>``), the toolsets a key may use, admin rights.

With no keys configured, auth is off: every caller may use every tool, and admin operations are allowed from
loopback addresses only (``serve`` then binds 127.0.0.1 alone). With keys configured, every request but
``/healthz`` and the ``/status`` summary must present one; keys are compared as SHA-256 digests in constant
time (``Settings.find_key``) and never logged.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ...catalog.snapshot import Catalog, Tool
from ...errors import Forbidden, Unauthorized, UnknownTool
from ...settings import ApiKey, Settings
from ...upstream.address import is_loopback

SCOPE_KEY = "gateway.caller"  # where the MCP adapter finds the caller authenticated for its HTTP request


class MissingKey(Unauthorized):
    """No API key was presented (a wrong one is a plain ``Unauthorized``): the reason ``auth_failure`` events give."""


@dataclass(frozen=True, slots=True)
class Caller:
    key: ApiKey | None  # the key presented: None when auth is off, or for an anonymous summary request
    loopback: bool
    auth: bool  # whether this server requires API keys

    @property
    def name(self) -> str | None:
        return self.key.name if self.key else None

    @property
    def toolsets(self) -> tuple[str, ...]:
        """The toolsets this caller is limited to; empty means every toolset."""
        return self.key.toolsets if self.key else ()

    @property
    def is_admin(self) -> bool:
        if not self.auth:
            return self.loopback
        return self.key is not None and self.key.admin

    def may_use(self, tool: Tool) -> bool:
        return self.may_see(tool.definition.toolsets)

    def may_see(self, toolsets: tuple[str, ...]) -> bool:
        """Whether this caller may use what belongs to ``toolsets`` (a tool, a prompt, a resource)."""
        if not self.auth:
            return True
        return self.key is not None and self.key.allows(toolsets)

    def tool(self, catalog: Catalog, tool_id: str) -> Tool:
        """The tool ``tool_id`` if this caller may use it. Else ``UnknownTool``, exactly as for a missing tool and
        with close matches among the caller's own tools only: a key learns nothing of tools outside its toolsets."""
        tool = catalog.tools.get(tool_id)
        if tool is not None and self.may_use(tool):
            return tool
        raise unknown_tool(tool_id, [t.id for t in catalog.tools.values() if self.may_use(t)])

    def user(self, asserted: str | None) -> str | None:
        """The user tools see. A request may assert one (``X-User``, a chat body's ``user``) when auth is off or its
        key has ``may_assert_user``; otherwise it is the key's name, so a key holder cannot pose as someone else."""
        if asserted and (not self.auth or (self.key is not None and self.key.may_assert_user)):
            return asserted
        return self.name

    def check_admin(self) -> None:
        if not self.is_admin:
            raise Forbidden("This operation needs an admin API key." if self.auth
                            else "Without API keys configured, admin operations are allowed from loopback only.")


def authenticate(settings: Settings, headers: Mapping[str, str], client_host: str | None, *, required: bool = True) -> Caller:
    """The caller behind a request; raises ``Unauthorized`` when auth is on and no valid key was presented.

    ``headers``: Starlette's ``Headers``, or the first value of each lowercase name (the fast paths: ``rest.fast``,
    ``McpSurface._take``).
    ``required=False`` answers an anonymous caller (no key) instead of raising, for endpoints whose summary is
    public; a wrong key is refused either way.
    """
    loopback = is_loopback(client_host)
    if not settings.auth_enabled:
        return Caller(None, loopback, auth=False)
    scheme, _, presented = headers.get("authorization", "").partition(" ")
    if not presented:
        if required:
            raise MissingKey("Missing API key: send it as 'Authorization: Bearer <key>'.")
        return Caller(None, loopback, auth=True)
    key = settings.find_key(presented.strip()) if scheme.lower() == "bearer" else None
    if key is None:
        raise Unauthorized("Invalid API key.")
    return Caller(key, loopback, auth=True)


def unknown_tool(tool_id: str, known: Iterable[str]) -> UnknownTool:
    """The error for a tool name the caller cannot reach, suggesting close matches among ``known`` only."""
    return UnknownTool(tool_id, difflib.get_close_matches(tool_id, list(known), n=3, cutoff=0.6))


