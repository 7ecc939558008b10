"""An HTTP binding's ``auth:``: the token the gateway gets for the upstream (``gateway.upstream.tokens``), sent as
``Authorization: Bearer``. Checked when the catalog is built (the client secret must be a ``{{ secrets.NAME }}``
the settings allow; an issuer must be known for the token endpoint); at call time, a token for this caller.

Tools declaring the same ``auth:`` in one catalog share a ``TokenSource``, so an exchanged token serves every
tool of that upstream for that person until it expires.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx

from .. import secrets as secret_store
from ..context import CallContext
from ..definitions.model import ToolDefinition
from ..errors import ToolError
from ..identity.config import SECRET
from ..upstream.tokens import AuthSpec, TokenSource, TokenUnavailable
from . import BuildEnv


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
    if secret_store.missing([name[1]]):
        env.warnings.append(definition.problem(["binding", "http", *where, "client_secret"],
                                               f"secret '{name[1]}' is not set in the environment: calls of "
                                               f"'{definition.id}' fail until it is", severity="warning"))
    secret_store.remember([name[1]])
    auth = AuthSpec(grant=grant, client_id=given["client_id"], secret_name=name[1],
                    token_endpoint=given.get("token_endpoint"), issuer=None if given.get("token_endpoint") else issuer,
                    audience=given.get("audience"), resource=given.get("resource"), scope=given.get("scope"),
                    client_auth=given.get("client_auth", "basic"))
    sources = env.memo.setdefault("http auth", {})
    return sources.setdefault(auth, TokenSource(auth))


async def bearer(tool_id: str, source: TokenSource, client: httpx.AsyncClient,
                 context: CallContext) -> tuple[str, list[tuple[str, str]]]:
    """The Authorization value for this call, and the values to redact from what the call returns: the token, the
    client secret and the caller's own token."""
    try:
        secret = secret_store.resolve([source.spec.secret_name])[source.spec.secret_name]
    except secret_store.SecretsMissing as exc:
        raise ToolError(f"Tool '{tool_id}' cannot run: {exc}.") from None
    exchanging = source.spec.grant == "token_exchange" and context.subject_token is not None
    subject = context.subject_token.reveal() if exchanging else None
    hidden = [(source.spec.secret_name, secret)] + ([("caller token", subject)] if subject is not None else [])
    try:
        token = await source.token(client, secret, subject)
    except TokenUnavailable as exc:  # an identity provider's error text could echo what it was sent
        message = secret_store.redact(str(exc), hidden)
        raise ToolError(f"Tool '{tool_id}' cannot get a token for its upstream: {message}.") from None
    return f"Bearer {token}", [*hidden, ("upstream token", token)]
