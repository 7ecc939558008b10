"""What a verified token's claims grant: the user tools see, the toolsets, admin — by the ``oauth.rules`` of the
settings, so the same tool rules apply to a person as to an API key."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .config import OAuthConfig, Rule


class TokenRefused(Exception):
    """The token is not one this gateway accepts (401 ``invalid_token``); the message says why."""


@dataclass(frozen=True, slots=True)
class Identity:
    """A caller proven by an access token. ``toolsets`` None: every toolset; empty: none."""

    user: str
    issuer: str
    client_id: str | None
    scopes: frozenset[str]
    toolsets: tuple[str, ...] | None
    admin: bool
    expires_at: float  # until when the check holds (a JWT's exp and the leeway; an introspection's cache_s)

    def allows(self, tool_toolsets: tuple[str, ...]) -> bool:
        return self.toolsets is None or bool(set(self.toolsets) & set(tool_toolsets))


def scopes_of(claims: Mapping[str, Any]) -> frozenset[str]:
    """RFC 9068's ``scope`` (space-separated), or the ``scp`` list some issuers write."""
    scope = claims.get("scope", claims.get("scp", ""))
    if isinstance(scope, str):
        return frozenset(scope.split())
    return frozenset(item for item in scope if isinstance(item, str)) if isinstance(scope, list) else frozenset()


def claim(claims: Mapping[str, Any], name: str) -> Any:
    """A claim by name, or by a dotted path into nested objects (Keycloak's ``realm_access.roles``)."""
    if name in claims:
        return claims[name]
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


def _values(value: Any) -> set[str]:
    if isinstance(value, str):
        return set(value.replace(",", " ").split())
    if isinstance(value, list):
        return {str(item) for item in value if isinstance(item, (str, int))}
    return set()


def matches(rule: Rule, config: OAuthConfig, claims: Mapping[str, Any], scopes: frozenset[str]) -> bool:
    if not set(rule.scopes) <= scopes:
        return False
    if rule.groups and not set(rule.groups) & _values(claim(claims, config.groups_claim)):
        return False
    if rule.roles and not set(rule.roles) & _values(claim(claims, config.roles_claim)):
        return False
    for name, wanted in rule.claims:
        value = claim(claims, name)
        if not (str(value).lower() == wanted.lower() if isinstance(value, bool)
                else wanted in _values(value) if isinstance(value, list) else str(value) == wanted):
            return False
    return True


def grant(config: OAuthConfig, claims: Mapping[str, Any], scopes: frozenset[str]) -> tuple[tuple[str, ...] | None, bool]:
    """(toolsets, admin) the claims earn: with no rules, every toolset and no admin; else the union of what the
    matching rules grant — nothing when none matches."""
    if config.rules is None:
        return None, False
    toolsets: set[str] = set()
    every, admin = False, False
    for rule in config.rules:
        if matches(rule, config, claims, scopes):
            admin = admin or rule.admin
            if rule.toolsets is None:
                every = True
            else:
                toolsets.update(rule.toolsets)
    return (None if every else tuple(sorted(toolsets))), admin


def step_up_scopes(config: OAuthConfig, tool_toolsets: tuple[str, ...]) -> tuple[str, ...]:
    """The scopes that would earn a tool of ``tool_toolsets`` through a scope-only rule: what a client may ask its
    user for (MCP's step-up authorization). Empty when no scope would."""
    found: dict[str, None] = {}
    for rule in config.rules or ():
        if rule.scope_only and (rule.toolsets is None or set(rule.toolsets) & set(tool_toolsets)):
            found.update(dict.fromkeys(rule.scopes))
    return tuple(found)
