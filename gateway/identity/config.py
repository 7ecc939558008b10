"""The ``oauth:`` setting: the gateway as an OAuth 2.1 resource server (RFC 9068 JWT access tokens, RFC 9728
protected-resource metadata), checked when the settings load.

    oauth:
      issuer: https://idp.example.com          # the authorization server; its keys come from its discovery document
      audience: https://gateway.example.com    # the gateway's own resource URL (its /mcp is <audience>/mcp)
      user_claim: sub                          # the claim that names the user tools see (context.user)
      algorithms: [RS256, ES256]               # signatures accepted: asymmetric ones only
      leeway_s: 30                             # clock skew allowed on exp / nbf / iat
      required_scopes: [mcp]                   # every token must hold these (else 403 insufficient_scope)
      scopes_supported: [mcp, finance]         # published in the metadata (default: the scopes rules name)
      groups_claim: groups                     # where ``groups:`` rules look (roles: ``roles_claim``)
      rules:                                   # absent: every valid token may use every tool, none is admin
        - {scope: finance, toolsets: [finance]}
        - {groups: [support], toolsets: [support]}
        - {roles: [gateway-admin], admin: true, toolsets: "*"}
      jwks: {cache_s: 300, refresh_min_s: 30, max_bytes: 65536, max_keys: 20, timeout_s: 5}
      max_token_bytes: 16384
      introspection:                           # RFC 7662, for opaque (non-JWT) access tokens
        client_id: tool-gateway
        client_secret: "{{ secrets.INTROSPECTION_SECRET }}"
        cache_s: 60                            # an answer is kept this long at most (revocation shows then)
      console: {client_id: gateway-console, scopes: [mcp]}   # the admin console signs in here (a public client)

This module is pure data: fetching the keys and checking tokens are ``keys`` and ``tokens``.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

# Asymmetric algorithms only: a shared-secret (HS*) key would let anyone holding the issuer's public key, or any
# other client of the issuer, mint tokens; ``none`` is no signature at all.
ASYMMETRIC = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
DEFAULT_LEEWAY_S = 30.0
MAX_LEEWAY_S = 300.0
KNOWN = {"issuer", "audience", "user_claim", "algorithms", "leeway_s", "required_scopes", "scopes_supported",
         "groups_claim", "roles_claim", "rules", "jwks", "jwks_uri", "max_token_bytes", "introspection",
         "console"}
RULE_KEYS = {"scope", "groups", "roles", "claim", "toolsets", "admin"}
SECRET = re.compile(r"\{\{-?\s*secrets\.([A-Za-z_][A-Za-z0-9_]*)\s*-?\}\}")  # the one form a secret is written in


class OAuthInvalid(ValueError):
    """The setting is wrong: the message says what and where."""


@dataclass(frozen=True)
class JwksBounds:
    """What fetching the issuer's keys may cost: answers over ``max_bytes`` or ``max_keys`` keys are refused, a
    fetch past ``timeout_s`` abandoned; keys are kept ``cache_s`` and fetched again on an unknown ``kid`` at most
    once per ``refresh_min_s`` (a flood of made-up kids costs the issuer one request per that interval)."""

    cache_s: float = 300.0
    refresh_min_s: float = 30.0
    max_bytes: int = 65_536
    max_keys: int = 20
    timeout_s: float = 5.0


@dataclass(frozen=True)
class Introspection:
    """How opaque tokens are checked: at the issuer's introspection endpoint (its discovery document's, unless
    ``endpoint``), as client ``client_id`` whose secret is the environment variable ``secret_name``."""

    client_id: str
    secret_name: str
    endpoint: str | None = None
    cache_s: float = 60.0


@dataclass(frozen=True)
class Rule:
    """What a token whose claims match grants: every condition written must hold (``scope``: all these scopes;
    ``groups`` / ``roles``: any of these in the claim; ``claim``: each named claim equal to, or a list holding, the
    value). ``toolsets`` None grants every toolset."""

    scopes: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    roles: tuple[str, ...] = ()
    claims: tuple[tuple[str, str], ...] = ()
    toolsets: tuple[str, ...] | None = ()
    admin: bool = False

    @property
    def scope_only(self) -> bool:
        """Whether holding scopes alone satisfies it: what a client can ask the user for (step-up)."""
        return bool(self.scopes) and not (self.groups or self.roles or self.claims)


@dataclass(frozen=True)
class ConsoleClient:
    """How the admin console signs in at the issuer: as the public client ``client_id`` (authorization code + PKCE,
    no secret: a browser keeps none), asking for ``scopes`` (the required ones at least, so its token is accepted)."""

    client_id: str
    scopes: tuple[str, ...]


@dataclass(frozen=True)
class OAuthConfig:
    issuer: str
    audience: str
    user_claim: str = "sub"
    algorithms: tuple[str, ...] = ASYMMETRIC
    leeway_s: float = DEFAULT_LEEWAY_S
    required_scopes: tuple[str, ...] = ()
    scopes_supported: tuple[str, ...] = ()
    groups_claim: str = "groups"
    roles_claim: str = "roles"
    rules: tuple[Rule, ...] | None = None
    jwks: JwksBounds = field(default_factory=JwksBounds)
    jwks_uri: str | None = None  # skips discovery when the issuer publishes none
    max_token_bytes: int = 16_384
    introspection: Introspection | None = None
    console: ConsoleClient | None = None

    @property
    def mcp_resource(self) -> str:
        """The resource identifier of the MCP endpoint (RFC 9728's path-based metadata names it)."""
        return self.audience + "/mcp"

    @property
    def audiences(self) -> tuple[str, str]:
        """The ``aud`` values a token for this gateway may carry: the gateway, or its MCP endpoint."""
        return (self.audience, self.mcp_resource)

    @property
    def published_scopes(self) -> tuple[str, ...]:
        if self.scopes_supported:
            return self.scopes_supported
        named = [*self.required_scopes, *(s for rule in self.rules or () for s in rule.scopes)]
        return tuple(dict.fromkeys(named))


def parse(value: Any) -> OAuthConfig | None:
    """The setting, checked; ``OAuthInvalid`` says what is wrong and where (``oauth.rules[2].toolsets``)."""
    if value in (None, {}):
        return None
    if not isinstance(value, Mapping):
        raise OAuthInvalid("setting 'oauth': expected a mapping with at least 'issuer' and 'audience'")
    unknown = sorted(set(value) - KNOWN)
    if unknown:
        raise OAuthInvalid(f"setting 'oauth': unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(KNOWN))})")
    for name in ("issuer", "audience"):
        if not isinstance(value.get(name), str) or not value[name]:
            raise OAuthInvalid(f"setting 'oauth.{name}': required, a URL")
    issuer, audience = value["issuer"], value["audience"].rstrip("/")
    _url(issuer, "oauth.issuer")
    _url(audience, "oauth.audience")
    if value.get("jwks_uri") is not None:
        _url(value["jwks_uri"], "oauth.jwks_uri")
    algorithms = _words(value.get("algorithms", ASYMMETRIC), "oauth.algorithms")
    refused = [alg for alg in algorithms if alg not in ASYMMETRIC]
    if refused or not algorithms:
        raise OAuthInvalid(f"setting 'oauth.algorithms': {', '.join(refused) or 'empty'} refused; use asymmetric "
                         f"algorithms only ({', '.join(ASYMMETRIC)})")
    leeway = _number(value.get("leeway_s", DEFAULT_LEEWAY_S), "oauth.leeway_s", 0, MAX_LEEWAY_S)
    required = _words(value.get("required_scopes", ()), "oauth.required_scopes")
    rules = value.get("rules")
    if rules is not None and not isinstance(rules, list):
        raise OAuthInvalid("setting 'oauth.rules': expected a list of rules like {scope: finance, toolsets: [finance]}")
    return OAuthConfig(
        issuer=issuer, audience=audience, algorithms=algorithms, leeway_s=leeway,
        user_claim=_name(value.get("user_claim", "sub"), "oauth.user_claim"),
        required_scopes=required,
        scopes_supported=_words(value.get("scopes_supported", ()), "oauth.scopes_supported"),
        groups_claim=_name(value.get("groups_claim", "groups"), "oauth.groups_claim"),
        roles_claim=_name(value.get("roles_claim", "roles"), "oauth.roles_claim"),
        rules=None if rules is None else tuple(_rule(rule, f"oauth.rules[{i}]") for i, rule in enumerate(rules)),
        jwks=_bounds(value.get("jwks") or {}), jwks_uri=value.get("jwks_uri"),
        max_token_bytes=int(_number(value.get("max_token_bytes", 16_384), "oauth.max_token_bytes", 512, 65_536)),
        introspection=None if value.get("introspection") is None else _introspection(value["introspection"]),
        console=None if value.get("console") is None else _console(value["console"], required),
    )


def is_loopback_host(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def _url(value: Any, where: str) -> None:
    """An https URL (http only on a loopback host, for a local test server): keys fetched in clear could be
    anyone's."""
    parts = urlsplit(value) if isinstance(value, str) else None
    if parts is None or not parts.hostname or parts.query or parts.fragment or not (
            parts.scheme == "https" or (parts.scheme == "http" and is_loopback_host(parts.hostname))):
        raise OAuthInvalid(f"setting '{where}': expected an https URL without query or fragment (http only on a "
                         f"loopback host), got {value!r}")


def _rule(value: Any, where: str) -> Rule:
    if not isinstance(value, Mapping):
        raise OAuthInvalid(f"setting '{where}': expected a mapping like {{scope: finance, toolsets: [finance]}}")
    unknown = sorted(set(value) - RULE_KEYS)
    if unknown:
        raise OAuthInvalid(f"setting '{where}': unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(RULE_KEYS))})")
    claims = value.get("claim") or {}
    if not isinstance(claims, Mapping) or not all(isinstance(v, (str, int, bool)) for v in claims.values()):
        raise OAuthInvalid(f"setting '{where}.claim': expected a mapping of claim names to values")
    rule = Rule(scopes=_words(value.get("scope", ()), f"{where}.scope"),
                groups=_words(value.get("groups", ()), f"{where}.groups"),
                roles=_words(value.get("roles", ()), f"{where}.roles"),
                claims=tuple((str(k), str(v)) for k, v in claims.items()),
                toolsets=None if value.get("toolsets") == "*" else _words(value.get("toolsets", ()), f"{where}.toolsets"),
                admin=value.get("admin", False))
    if not isinstance(rule.admin, bool):  # bool("false") would grant it
        raise OAuthInvalid(f"setting '{where}.admin': must be true or false")
    if not (rule.scopes or rule.groups or rule.roles or rule.claims):
        raise OAuthInvalid(f"setting '{where}': a rule needs a condition (scope, groups, roles or claim); to grant "
                         "every valid token, leave 'rules' out")
    if rule.toolsets == () and not rule.admin:
        raise OAuthInvalid(f"setting '{where}': grants nothing; give it toolsets (a list, or \"*\") or admin: true")
    return rule


def _introspection(value: Any) -> Introspection:
    where = "oauth.introspection"
    if not isinstance(value, Mapping) or set(value) - {"client_id", "client_secret", "endpoint", "cache_s"}:
        raise OAuthInvalid(f"setting '{where}': expected {{client_id, client_secret, endpoint, cache_s}}")
    secret = SECRET.fullmatch(str(value.get("client_secret", "")))
    if not isinstance(value.get("client_id"), str) or not value["client_id"] or secret is None:
        raise OAuthInvalid(f"setting '{where}': needs client_id and client_secret as {{{{ secrets.NAME }}}}")
    if value.get("endpoint") is not None:
        _url(value["endpoint"], f"{where}.endpoint")
    return Introspection(client_id=value["client_id"], secret_name=secret[1], endpoint=value.get("endpoint"),
                         cache_s=_number(value.get("cache_s", 60), f"{where}.cache_s", 0, 3_600))
def _console(value: Any, required: tuple[str, ...]) -> ConsoleClient:
    if not isinstance(value, Mapping) or set(value) - {"client_id", "scopes"}:
        raise OAuthInvalid("setting 'oauth.console': expected {client_id, scopes}")
    client_id = value.get("client_id")
    if not isinstance(client_id, str) or not client_id.isprintable() or not 0 < len(client_id) <= 200:
        raise OAuthInvalid(f"setting 'oauth.console.client_id': required, the console's client id at the issuer, "
                         f"got {client_id!r}")
    scopes = _words(value.get("scopes", required), "oauth.console.scopes")
    if any(part != "".join(part.split()) for part in scopes):  # scopes travel space-separated
        raise OAuthInvalid(f"setting 'oauth.console.scopes': a scope has no spaces, got {list(scopes)!r}")
    missing = [scope for scope in required if scope not in scopes]
    if missing:
        raise OAuthInvalid(f"setting 'oauth.console.scopes': must include the required scope(s) {', '.join(missing)}, "
                         "or the console's token would be refused")
    return ConsoleClient(client_id, scopes)


def _bounds(value: Any) -> JwksBounds:
    if not isinstance(value, Mapping) or set(value) - {"cache_s", "refresh_min_s", "max_bytes", "max_keys", "timeout_s"}:
        raise OAuthInvalid("setting 'oauth.jwks': expected {cache_s, refresh_min_s, max_bytes, max_keys, timeout_s}")
    return JwksBounds(cache_s=_number(value.get("cache_s", 300), "oauth.jwks.cache_s", 1, 86_400),
                      refresh_min_s=_number(value.get("refresh_min_s", 30), "oauth.jwks.refresh_min_s", 0, 3_600),
                      max_bytes=int(_number(value.get("max_bytes", 65_536), "oauth.jwks.max_bytes", 1_024, 1_048_576)),
                      max_keys=int(_number(value.get("max_keys", 20), "oauth.jwks.max_keys", 1, 200)),
                      timeout_s=_number(value.get("timeout_s", 5), "oauth.jwks.timeout_s", 0.1, 60))


def _words(value: Any, where: str) -> tuple[str, ...]:
    """A list of names; a lone word is one (``scope: finance``)."""
    items = [value] if isinstance(value, str) else value
    if not isinstance(items, (list, tuple)) or not all(isinstance(item, str) and item for item in items):
        raise OAuthInvalid(f"setting '{where}': expected a name or a list of names, got {value!r}")
    return tuple(items)


def _name(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise OAuthInvalid(f"setting '{where}': expected a claim name, got {value!r}")
    return value


def _number(value: Any, where: str, low: float, high: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise OAuthInvalid(f"setting '{where}': expected a number from {low:g} to {high:g}, got {value!r}")
    return float(value)
