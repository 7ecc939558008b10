"""An HTTP binding's ``auth:``: the token the gateway gets for the upstream (``gateway.upstream.tokens``), sent as
``Authorization: Bearer``. Checked when the catalog is built (the client secret must be a ``{{ secrets.NAME }}``
the settings allow; an issuer must be known for the token endpoint); at call time, a token for this caller.

Tools declaring the same ``auth:`` in one catalog share a ``TokenSource``, so an exchanged token serves every
tool of that upstream for that person until it expires. ``authorization_code``: each person's own connection,
named by ``connection`` (``gateway.upstream.connections``); a call by someone not connected yet is an error result
that carries the link where they connect.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from .. import secrets as secret_store
from ..context import CallContext
from ..definitions.model import ToolDefinition
from ..errors import ConnectionNeeded, ToolError
from ..identity.config import SECRET
from ..upstream.tokens import AuthSpec, TokenSource, TokenUnavailable
from . import DECLARED_CONNECTIONS, BuildEnv


def parse(definition: ToolDefinition, spec: Mapping[str, Any], env: BuildEnv,
          problem: Any) -> TokenSource | None:
    """The token source of ``spec`` (the binding's ``auth``, shape checked by the schema); problems go to
    ``problem(path, message)``."""
    (grant, given), = spec.items()
    where = ("auth", grant)
    name = SECRET.fullmatch(given["client_secret"])
    assert name is not None  # the schema's pattern
    refused = secret_store.refusal(name[1], env.settings)
    if refused is not None:
        problem((*where, "client_secret"), refused)
        return None
    oauth = env.settings.oauth
    issuer = given.get("issuer") or (oauth.issuer if oauth is not None else None)
    if not given.get("token_endpoint") and issuer is None:
        problem(where, "no token endpoint: give 'token_endpoint' or 'issuer', or set the oauth setting")
        return None
    if grant == "authorization_code" and not given.get("authorization_endpoint") and issuer is None:
        problem(where, "no authorization endpoint: give 'authorization_endpoint' or 'issuer'")
        return None
    if secret_store.missing([name[1]]):
        env.warnings.append(definition.problem(["binding", "http", *where, "client_secret"],
                                               f"secret '{name[1]}' is not set in the environment: calls of "
                                               f"'{definition.id}' fail until it is", severity="warning"))
    secret_store.remember([name[1]])
    auth = AuthSpec(grant=grant, client_id=given["client_id"], secret_name=name[1],
                    token_endpoint=given.get("token_endpoint"), issuer=None if given.get("token_endpoint") else issuer,
                    audience=given.get("audience"), resource=given.get("resource"), scope=given.get("scope"),
                    client_auth=given.get("client_auth", "basic"), connection=given.get("connection"),
                    authorization_endpoint=given.get("authorization_endpoint"))
    if auth.grant == "authorization_code" and not _connection(auth, env, problem, where):
        return None
    sources = env.memo.setdefault("http auth", {})
    source = sources.get(auth)
    if source is None:
        source = sources[auth] = TokenSource(auth)
        if auth.grant == "authorization_code" and env.connections is not None and env.connect_sources:
            source.connections = env.connections()
            source.public_url = oauth.audience if oauth is not None else ""
            # Declared once the build succeeds (Gateway._build): a build that fails changes no connection.
            env.memo.setdefault(DECLARED_CONNECTIONS, []).append(source)
    return source


def _connection(auth: AuthSpec, env: BuildEnv, problem: Any, where: tuple[str, ...]) -> bool:
    """Whether the person's connection ``auth`` declares can be kept: a key to seal it, one declaration per name."""
    if not env.settings.upstream_oauth_key_secret:
        problem(where, "each person's tokens are kept encrypted: set the setting upstream_oauth_key_secret to the "
                       "name of a secret holding the key")
        return False
    named = env.memo.setdefault("connections", {})
    if named.setdefault(auth.connection, auth) != auth:
        problem((*where, "connection"), f"connection '{auth.connection}' is declared otherwise by another tool: "
                                        "the tools sharing a connection declare the same auth")
        return False
    return True


def connect_link(source: TokenSource) -> str:
    """Where a person connects the account ``source`` (``authorization_code``) declares."""
    return f"{source.public_url}/oauth/connect/{source.spec.connection}"


async def bearer(tool_id: str, source: TokenSource, client: httpx.AsyncClient,
                 context: CallContext) -> tuple[str, list[tuple[str, str]]]:
    """The Authorization value for this call, and the values to redact from what the call returns: the token, the
    client secret and the caller's own token."""
    try:
        secret = secret_store.resolve([source.spec.secret_name])[source.spec.secret_name]
    except secret_store.SecretsMissing as exc:
        raise ToolError(f"Tool '{tool_id}' cannot run: {exc}.") from None
    if source.spec.grant == "authorization_code":
        return await _connected(tool_id, source, client, context, secret)
    exchanging = source.spec.grant == "token_exchange" and context.subject_token is not None
    subject = context.subject_token.reveal() if exchanging else None
    hidden = [(source.spec.secret_name, secret)] + ([("caller token", subject)] if subject is not None else [])
    try:
        token = await source.token(client, secret, subject)
    except TokenUnavailable as exc:  # an identity provider's error text could echo what it was sent
        message = secret_store.redact(str(exc), hidden)
        raise ToolError(f"Tool '{tool_id}' cannot get a token for its upstream: {message}.") from None
    return f"Bearer {token}", [*hidden, ("upstream token", token)]


async def _connected(tool_id: str, source: TokenSource, client: httpx.AsyncClient, context: CallContext,
                     secret: str) -> tuple[str, list[tuple[str, str]]]:
    """The calling person's own token for the connection ``source`` declares."""
    from ..upstream.connections import NotAPerson, NotConnected

    connections = source.connections
    if connections is None:
        raise ToolError(f"Tool '{tool_id}' uses each person's own connection, which only a running gateway keeps.")
    user = context.caller[len("oauth:"):] if context.issuer and (context.caller or "").startswith("oauth:") else None
    link = connect_link(source)
    hidden = [(source.spec.secret_name, secret)]
    try:
        token = await connections.token(source, client, secret, context.issuer, user, link)
    except NotConnected as exc:
        raise ConnectionNeeded(f"Tool '{tool_id}' cannot run: {exc}.", link) from None
    except NotAPerson as exc:
        raise ToolError(f"Tool '{tool_id}' cannot run: {exc}.") from None
    except TokenUnavailable as exc:
        raise ToolError(f"Tool '{tool_id}' cannot get a token for its upstream: "
                        f"{secret_store.redact(str(exc), hidden)}.") from None
    return f"Bearer {token}", [*hidden, ("upstream token", token)]
