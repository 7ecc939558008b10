"""Who is calling: an API key or an OAuth 2.1 access token (``Authorization: Bearer <key or token>``), the toolsets
the caller may use, admin rights.

With neither keys nor ``oauth`` configured, auth is off: every caller may use every tool, and admin operations are
allowed from loopback addresses only (``serve`` then binds 127.0.0.1 alone). Otherwise every request but
``/healthz``, the ``/status`` summary and the protected-resource metadata must present credentials. A bearer value
is first compared with the keys' SHA-256 digests in constant time (``Settings.find_key``); failing that, with
``oauth`` set, it is checked as an access token (``gateway.identity.tokens``). Neither is ever logged.

Every 401 carries ``WWW-Authenticate: Bearer resource_metadata="…"`` (RFC 9728) once ``oauth`` is set, so a
client learns where to get a token; a token lacking a required scope, or the scope a tool needs, is a 403 with
``error="insufficient_scope"`` and the ``scope`` to ask for (MCP's step-up authorization).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ...catalog.snapshot import Catalog, Tool
from ...context import SubjectToken
from ...errors import Forbidden, Unauthorized, UnknownTool
from ...identity.config import OAuthConfig
from ...identity.grants import Identity, TokenRefused, step_up_scopes
from ...settings import ApiKey, Settings
from ...upstream.address import is_loopback
from .metadata import challenge

if TYPE_CHECKING:
    from ...runtime.gateway import Gateway

SCOPE_KEY = "gateway.caller"  # where the MCP adapter finds the caller authenticated for its HTTP request
OAUTH_PRINCIPAL = "oauth:"  # before a token's user in the principal's name: never an API key's


class MissingKey(Unauthorized):
    """No credentials were presented (wrong ones are a plain ``Unauthorized``): the reason ``auth_failure`` events
    give."""


class InsufficientScope(Forbidden):
    """A token that lacks a scope this request needs: the client may ask its user for ``scopes`` and retry."""

    def __init__(self, message: str, scopes: tuple[str, ...], challenge: str):
        super().__init__(message)
        self.scopes = scopes
        self.challenge = challenge


@dataclass(frozen=True, slots=True)
class Caller:
    key: ApiKey | None  # the key presented: None when auth is off, for a token, or an anonymous summary request
    loopback: bool
    auth: bool  # whether this server requires credentials
    identity: Identity | None = None  # the person behind an OAuth access token
    token: SubjectToken | None = None  # that token, for exchanges at the issuer (never sent on as it is)
    oauth: OAuthConfig | None = None  # the settings that checked it: for step-up answers
    mcp: bool = False  # the request came to /mcp: its metadata is the path-based one

    @property
    def authenticated(self) -> bool:
        return self.key is not None or self.identity is not None

    @property
    def name(self) -> str | None:
        """The principal: the key's name, or ``oauth:<user>`` (what MCP sessions belong to, what rate limits and
        the audit trail's ``caller`` count)."""
        if self.key is not None:
            return self.key.name
        return OAUTH_PRINCIPAL + self.identity.user if self.identity is not None else None

    def who(self) -> dict[str, Any]:
        """The ``CallContext`` fields that say who calls: the principal, and an OAuth caller's client, issuer and
        token (for exchanges)."""
        identity = self.identity
        if identity is None:
            return {"caller": self.name}
        return {"caller": self.name, "client_id": identity.client_id, "issuer": identity.issuer,
                "subject_token": self.token}

    @property
    def reach(self) -> tuple[Any, ...]:
        """What decides which tools this caller may use: equal for callers who see the same tools, so a listing
        made for one serves the others (the surfaces' memo key). A token's toolsets (None: all, empty: none) are
        never a key's (empty: all)."""
        if not self.auth:
            return ("all",)
        if self.identity is not None:
            return ("token", self.identity.toolsets)
        return ("key", self.key.toolsets) if self.key is not None else ("nobody",)

    @property
    def is_admin(self) -> bool:
        if not self.auth:
            return self.loopback
        if self.identity is not None:
            return self.identity.admin
        return self.key is not None and self.key.admin

    def may_use(self, tool: Tool) -> bool:
        return self.may_see(tool.definition.toolsets)

    def may_see(self, toolsets: tuple[str, ...]) -> bool:
        """Whether this caller may use what belongs to ``toolsets`` (a tool, a prompt, a resource)."""
        if not self.auth:
            return True
        if self.identity is not None:
            return self.identity.allows(toolsets)
        return self.key is not None and self.key.allows(toolsets)

    def tool(self, catalog: Catalog, tool_id: str) -> Tool:
        """The tool ``tool_id`` if this caller may use it. Else ``UnknownTool``, exactly as for a missing tool and
        with close matches among the caller's own tools only: a key learns nothing of tools outside its toolsets —
        unless a token could earn the tool with a scope its user may grant (``InsufficientScope``, step-up)."""
        tool = catalog.tools.get(tool_id)
        if tool is not None and self.may_use(tool):
            return tool
        if tool is not None:
            self.step_up(tool)
        raise unknown_tool(tool_id, [t.id for t in catalog.tools.values() if self.may_use(t)])

    def step_up(self, tool: Tool) -> None:
        """``InsufficientScope`` when this token may not use ``tool`` but a scope its user may grant would earn it
        (a rule of scopes alone); nothing otherwise."""
        if self.identity is None or self.oauth is None or self.may_use(tool):
            return
        needed = tuple(s for s in step_up_scopes(self.oauth, tool.definition.toolsets) if s not in self.identity.scopes)
        if needed:
            raise self.insufficient(needed, f"Tool '{tool.id}' needs the scope {' '.join(needed)}.")

    def insufficient(self, needed: tuple[str, ...], message: str) -> InsufficientScope:
        """The 403 asking for ``needed`` on top of the scopes the token holds (a client asks for all it needs)."""
        assert self.identity is not None and self.oauth is not None
        wanted = tuple(dict.fromkeys((*sorted(self.identity.scopes), *needed)))
        return InsufficientScope(message, wanted, challenge(self.oauth, self.mcp, error="insufficient_scope",
                                                            description=message, scope=" ".join(wanted)))

    def user(self, asserted: str | None) -> str | None:
        """The user tools see. A request may assert one (``X-User``, a chat body's ``user``) when auth is off or its
        key has ``may_assert_user``; a token's user is its own; otherwise it is the key's name, so a key holder
        cannot pose as someone else."""
        if self.identity is not None:
            return self.identity.user
        if asserted and (not self.auth or (self.key is not None and self.key.may_assert_user)):
            return asserted
        return self.name

    def check_admin(self) -> None:
        if not self.is_admin:
            if not self.auth:
                raise Forbidden("Without API keys configured, admin operations are allowed from loopback only.")
            raise Forbidden("This operation needs an admin API key." if self.oauth is None
                            else "This operation needs an admin API key or an admin's access token.")


async def authenticate(gateway: Gateway, headers: Mapping[str, str], client_host: str | None, *,
                       required: bool = True, mcp: bool = False) -> Caller:
    """The caller behind a request; raises ``Unauthorized`` when auth is on and no valid credentials came.

    ``headers``: Starlette's ``Headers``, or the first value of each lowercase name (the fast paths: ``rest.fast``,
    ``McpSurface._take``). ``mcp``: the request is to ``/mcp`` (whose metadata is the path-based one).
    ``required=False`` answers an anonymous caller (no credentials) instead of raising, for endpoints whose summary
    is public; wrong credentials are refused either way.
    """
    settings = gateway.settings
    loopback = is_loopback(client_host)
    if not settings.auth_enabled:
        return Caller(None, loopback, auth=False)
    oauth = settings.oauth
    scheme, _, presented = headers.get("authorization", "").partition(" ")
    presented = presented.strip()
    if not presented or scheme.lower() != "bearer":
        if presented or required:
            raise _refusal(settings, mcp, None if presented else "missing",
                           "Send credentials as 'Authorization: Bearer <API key or access token>'.")
        return Caller(None, loopback, auth=True, oauth=oauth, mcp=mcp)
    key = settings.find_key(presented) if settings.api_keys else None
    if key is not None:
        return Caller(key, loopback, auth=True, oauth=oauth, mcp=mcp)
    if oauth is None or gateway.identity is None:
        raise Unauthorized("Invalid API key.")
    try:
        identity = await gateway.identity.identity(presented)
    except TokenRefused as exc:
        raise _refusal(settings, mcp, "invalid_token", str(exc)) from None
    caller = Caller(None, loopback, auth=True, identity=identity, token=SubjectToken(presented), oauth=oauth, mcp=mcp)
    missing = tuple(scope for scope in oauth.required_scopes if scope not in identity.scopes)
    if missing:
        raise caller.insufficient(missing, f"This gateway needs the scope {' '.join(missing)}.")
    return caller


def _refusal(settings: Settings, mcp: bool, error: str | None, message: str) -> Unauthorized:
    """A 401: with ``oauth`` set, its challenge names the protected-resource metadata (and, for a token that was
    refused, ``error="invalid_token"``)."""
    if settings.oauth is None:  # API keys only: what a key holder needs to hear
        message = ("Missing API key: send it as 'Authorization: Bearer <key>'." if error == "missing"
                   else "Invalid API key.")
    refusal: Unauthorized = MissingKey(message) if error == "missing" else Unauthorized(message)
    if settings.oauth is not None:
        scope = " ".join(settings.oauth.required_scopes) or None
        refusal.challenge = challenge(settings.oauth, mcp, error=None if error == "missing" else error,
                                      description=None if error == "missing" else message, scope=scope)
    return refusal


def unknown_tool(tool_id: str, known: Iterable[str]) -> UnknownTool:
    """The error for a tool name the caller cannot reach, suggesting close matches among ``known`` only."""
    return UnknownTool(tool_id, difflib.get_close_matches(tool_id, list(known), n=3, cutoff=0.6))
