"""Checking an access token (RFC 9068 JWT): size, then an allowed asymmetric algorithm, then the signature with
the issuer's key its ``kid`` names, then ``iss``, ``aud``, ``exp`` / ``nbf`` / ``iat`` within the leeway — PyJWT
does the cryptography and the claim checks. A token checked once is remembered (by its SHA-256) until it expires,
so a client's every call does not pay for the signature again.

A refusal's message says what is wrong with the token in terms a client's developer can act on, and never
quotes the token.
"""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import jwt
from jwt.exceptions import (
    ExpiredSignatureError,
    ImmatureSignatureError,
    InvalidAudienceError,
    InvalidIssuerError,
    InvalidTokenError,
    MissingRequiredClaimError,
)

from .config import OAuthConfig
from .grants import Identity, TokenRefused, claim, grant, scopes_of
from .introspect import Introspector
from .keys import IssuerKeys

REMEMBERED = 4_096  # tokens whose check is kept: bounded, the oldest forgotten first
KEY_FAMILIES = {"RS": "RSA", "PS": "RSA", "ES": "EC", "Ed": "OKP"}
MAX_USER_CHARS = 256


class Verifier:
    def __init__(self, config: OAuthConfig, secret: Callable[[str], str] | None = None):
        """``secret``: the value of a secret by name, for introspection's client secret."""
        self.config = config
        self.keys = IssuerKeys(config)
        self._checked: OrderedDict[bytes, Identity] = OrderedDict()
        self.introspector = Introspector(config, secret) if config.introspection and secret else None

    async def identity(self, token: str) -> Identity:
        if len(token) > self.config.max_token_bytes:
            raise TokenRefused(f"The access token is larger than {self.config.max_token_bytes:,} bytes.")
        digest = hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()
        known = self._checked.get(digest)
        if known is not None and time.time() < known.expires_at:
            self._checked.move_to_end(digest)
            return known
        identity = await self._check(token)
        self._checked[digest] = identity
        if len(self._checked) > REMEMBERED:
            self._checked.popitem(last=False)
        return identity

    async def _check(self, token: str) -> Identity:
        config = self.config
        if token.count(".") != 2:
            if self.introspector is None:
                raise TokenRefused("The access token is not a JWT (opaque tokens are not accepted).")
            claims = await self.introspector.claims(token)
            # Kept no longer than cache_s, so that a revoked token stops working within that.
            return self._identity(claims, min(float(claims["exp"]), time.time() + self.introspector.setting.cache_s))
        try:
            header = jwt.get_unverified_header(token)
        except InvalidTokenError:
            raise TokenRefused("The access token's header does not parse.") from None
        algorithm = header.get("alg")
        if algorithm not in config.algorithms:
            raise TokenRefused(f"The access token's algorithm {str(algorithm)[:20]!r} is not accepted "
                               f"(accepted: {', '.join(config.algorithms)}).")
        kid = header.get("kid")
        key = await self.keys.key(kid if isinstance(kid, str) else None)
        if key is None:
            raise TokenRefused("The access token is signed with a key the issuer does not publish.")
        if KEY_FAMILIES.get(algorithm[:2]) != key.key_type:  # an RSA key never checks an EC signature, and so on
            raise TokenRefused(f"The access token's algorithm {algorithm} does not fit its key.")
        try:
            claims = jwt.decode(token, key.key, algorithms=[algorithm], audience=list(config.audiences),
                                issuer=config.issuer, leeway=config.leeway_s,
                                options={"require": ["exp", "iss", "aud"]})
        except ExpiredSignatureError:
            raise TokenRefused("The access token has expired.") from None
        except ImmatureSignatureError:
            raise TokenRefused("The access token is not valid yet.") from None
        except InvalidAudienceError:
            raise TokenRefused(f"The access token is not meant for this gateway (its audience must be "
                               f"{config.audience} or {config.mcp_resource}).") from None
        except InvalidIssuerError:
            raise TokenRefused(f"The access token was not issued by {config.issuer}.") from None
        except MissingRequiredClaimError as exc:
            raise TokenRefused(f"The access token has no '{exc.claim}' claim.") from None
        except InvalidTokenError:
            raise TokenRefused("The access token's signature or claims are invalid.") from None
        return self._identity(claims, float(claims["exp"]) + config.leeway_s)

    def _identity(self, claims: dict[str, Any], expires_at: float) -> Identity:
        """Who the checked claims name, and what the rules grant them; remembered until ``expires_at``."""
        config = self.config
        user = claim(claims, config.user_claim)
        if not isinstance(user, str) or not user or len(user) > MAX_USER_CHARS:
            raise TokenRefused(f"The access token's '{config.user_claim}' claim does not name a user.")
        scopes = scopes_of(claims)
        toolsets, admin = grant(config, claims, scopes)
        client_id = claims.get("client_id", claims.get("azp"))
        return Identity(user=user, issuer=config.issuer, client_id=str(client_id)[:MAX_USER_CHARS] if client_id else None,
                        scopes=scopes, toolsets=toolsets, admin=admin, expires_at=expires_at)
