"""Tokens an attacker sends, and issuers that misbehave: each is refused with a 401 that says why, costs bounded
work, and never shows up in a log line."""

from __future__ import annotations

import base64
import json
import logging
import time
import uuid

import httpx
import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from issuer import Issuer, ec_key, issuing, rsa_key
from oauth_support import AUDIENCE, bearer


def _b64(data: dict) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).rstrip(b"=").decode()


def _claims(issuer: Issuer, **changes) -> dict:
    now = int(time.time())
    return {"iss": issuer.url, "sub": "mallory", "aud": AUDIENCE, "iat": now, "exp": now + 300,
            "scope": "tools finance", **changes}


def _refusal(served, token: str) -> str:
    answer = httpx.get(f"{served.url}/tools", headers=bearer(token))
    assert answer.status_code == 401, answer.text
    challenge = answer.headers["www-authenticate"]
    assert 'error="invalid_token"' in challenge
    assert token not in answer.text and token not in challenge
    return answer.json()["error"]


class Lines(list):
    """Every log line of the process while the test runs, at debug; ``access()`` adds uvicorn's access log (which
    the test server's logging keeps to itself)."""

    def __init__(self, log_handler):
        super().__init__()
        self.handler = Keep(self)
        self.add = log_handler
        log_handler(self.handler, "", level=logging.DEBUG)

    def access(self) -> None:
        self.add(self.handler, "uvicorn.access", level=logging.INFO)


class Keep(logging.Handler):
    def __init__(self, lines: list[str]):
        super().__init__()
        self.lines = lines

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def logged(log_handler) -> Lines:
    return Lines(log_handler)


def test_forged_and_misissued_tokens_are_refused(issuer, gateway_for, logged):
    """alg none, HS256 keyed with the issuer's public key (algorithm confusion), a key the issuer never
    published, wrong issuer, wrong audience, expired, not yet valid, no exp, a user claim missing, garbage: each a
    401 naming the reason — and no token text in any log line."""
    key = issuer.keys[0]
    public_pem = key.private.public_key().public_bytes(serialization.Encoding.PEM,
                                                       serialization.PublicFormat.SubjectPublicKeyInfo)
    stranger = rsa_key(kid=key.kid)  # the issuer's kid, someone else's key
    now = int(time.time())
    tokens = {
        "none": f"{_b64({'alg': 'none', 'typ': 'JWT', 'kid': key.kid})}.{_b64(_claims(issuer))}.",
        "confusion": _hs256(_claims(issuer), public_pem, key.kid),
        "stranger": jwt.encode(_claims(issuer), stranger.private, "RS256", headers={"kid": key.kid}),
        "issuer": issuer.token(audience=AUDIENCE, iss="https://evil.example"),
        "audience": issuer.token(audience="https://other.example"),
        "expired": issuer.token(audience=AUDIENCE, exp=now - 3600),
        "early": issuer.token(audience=AUDIENCE, nbf=now + 3600),
        "no exp": issuer.token(audience=AUDIENCE, exp=None),
        "no user": issuer.token(audience=AUDIENCE, sub=None),
        "garbage": "a.b.c",
        "opaque": "just-an-opaque-string",
    }
    expected = {"none": "algorithm 'none' is not accepted", "confusion": "algorithm 'HS256' is not accepted",
                "stranger": "signature or claims are invalid", "issuer": "not issued by",
                "audience": "not meant for this gateway", "expired": "expired", "early": "not valid yet",
                "no exp": "no 'exp' claim", "no user": "does not name a user", "garbage": "header does not parse",
                "opaque": "not a JWT"}
    with gateway_for(issuer) as served:
        reasons = {name: _refusal(served, token) for name, token in tokens.items()}
        good = issuer.token(audience=AUDIENCE, scope="tools")
        assert httpx.get(f"{served.url}/tools", headers=bearer(good)).status_code == 200
    for name, reason in reasons.items():
        assert expected[name] in reason, (name, reason)
    text = "\n".join(logged)
    assert not [name for name, token in {**tokens, "good": good}.items() if token in text]


def _hs256(claims: dict, secret: bytes, kid: str) -> str:
    """HS256 keyed with ``secret`` by hand: PyJWT itself refuses a PEM public key as an HMAC secret."""
    import hashlib
    import hmac

    signing_input = f"{_b64({'alg': 'HS256', 'typ': 'JWT', 'kid': kid})}.{_b64(claims)}"
    signature = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
    return f"{signing_input}.{base64.urlsafe_b64encode(signature).rstrip(b'=').decode()}"


def test_a_key_of_the_wrong_family_or_a_shared_secret_never_verifies(gateway_for):
    """An RS256 token naming the issuer's EC key is refused; an 'oct' key the issuer publishes is never used, so a
    token HMAC-signed with it is refused; the EC key verifies its own ES256 tokens."""
    with issuing(Issuer(keys=[rsa_key(), ec_key()])) as issuer:
        rsa, ec = issuer.keys
        secret = b"published-shared-secret-0123456789"
        issuer.extra_jwks = [{"kty": "oct", "kid": "shared", "k": base64.urlsafe_b64encode(secret).decode(),
                              "use": "sig"}]
        with gateway_for(issuer) as served:
            crossed = jwt.encode(_claims(issuer), rsa.private, "RS256", headers={"kid": ec.kid})
            assert "does not fit its key" in _refusal(served, crossed)
            assert "'HS256' is not accepted" in _refusal(served, _hs256(_claims(issuer), secret, "shared"))
            own = issuer.token(audience=AUDIENCE, scope="tools", key=ec)
            assert httpx.get(f"{served.url}/tools", headers=bearer(own)).status_code == 200


def test_an_unknown_kid_flood_costs_the_issuer_one_fetch_per_interval(issuer, gateway_for):
    """200 tokens naming made-up kids, with refresh_min_s 60: the JWKS is fetched once when the first comes (the
    keys are then 0 s old) and not again; a rotated key is picked up once the interval allows."""
    with gateway_for(issuer, jwks={"refresh_min_s": 60, "timeout_s": 2}) as served:
        assert httpx.get(f"{served.url}/tools", headers=bearer(issuer.token(audience=AUDIENCE))).status_code == 200
        before = issuer.asked["jwks"]
        with httpx.Client(base_url=served.url) as client:
            for _ in range(200):
                token = issuer.token(audience=AUDIENCE, header={"kid": uuid.uuid4().hex})
                assert client.get("/tools", headers=bearer(token)).status_code == 401
        assert issuer.asked["jwks"] - before <= 1


def test_a_rotated_key_is_fetched_when_a_token_names_it(issuer, gateway_for):
    with gateway_for(issuer) as served:  # refresh_min_s 0
        assert httpx.get(f"{served.url}/tools", headers=bearer(issuer.token(audience=AUDIENCE))).status_code == 200
        issuer.keys.insert(0, rsa_key())
        try:
            rotated = issuer.token(audience=AUDIENCE, scope="tools")
            assert httpx.get(f"{served.url}/tools", headers=bearer(rotated)).status_code == 200
        finally:
            issuer.keys.pop(0)


def test_an_oversized_token_is_refused_before_any_work(issuer, gateway_for):
    with gateway_for(issuer) as served:
        fetched = issuer.asked["jwks"]
        huge = issuer.token(audience=AUDIENCE, padding="x" * 40_000)
        reason = _refusal(served, huge)
    assert "larger than 16,384 bytes" in reason and issuer.asked["jwks"] == fetched


def test_an_issuer_that_hangs_costs_its_timeout_and_blocks_nobody(gateway_for):
    """The JWKS answers after 30 s; the token is refused after the 2 s bound, and meanwhile an API key's requests
    are answered."""
    from gateway.settings import _api_key, hash_key

    with issuing(Issuer(hang_s=30)) as slow, \
            gateway_for(slow, settings={"api_keys": (_api_key({"name": "k", "sha256": hash_key("key-1")}),)}) as served:
        import threading

        answers: list[int] = []
        waiting = threading.Thread(target=lambda: answers.append(
            httpx.get(f"{served.url}/tools", headers=bearer(slow.token(audience=AUDIENCE)), timeout=20).status_code))
        waiting.start()
        for _ in range(5):
            assert httpx.get(f"{served.url}/tools", headers=bearer("key-1"), timeout=5).status_code == 200
        waiting.join(20)
    assert answers == [401]


def test_a_jwks_redirect_to_another_origin_is_not_followed(gateway_for):
    """The issuer's JWKS redirects to another server's keys, which would verify the attacker's token: the
    redirect is not followed, and that server is never asked."""
    with issuing() as attacker, issuing() as issuer:
        issuer.redirect_jwks_to = f"{attacker.url}/jwks"
        attacker.url = issuer.url  # its tokens claim the victim's issuer
        with gateway_for(issuer) as served:
            forged = attacker.token(audience=AUDIENCE, scope="tools")
            assert "key the issuer does not publish" in _refusal(served, forged)
    assert attacker.asked["jwks"] == 0


def test_a_jwks_too_large_and_a_discovery_naming_another_issuer_are_refused(gateway_for):
    with issuing(Issuer(jwks_padding=200_000)) as bloated, gateway_for(bloated) as served:
        assert "key the issuer does not publish" in _refusal(served, bloated.token(audience=AUDIENCE))
    with issuing(Issuer(named_issuer="https://someone-else.example")) as mixed, gateway_for(mixed) as served:
        _refusal(served, mixed.token(audience=AUDIENCE))
        assert mixed.asked["jwks"] == 0


def test_a_token_in_the_query_string_is_refused_and_not_logged(issuer, gateway_for, logged):
    """RFC 6750's query form is refused (OAuth 2.1 drops it), and uvicorn's access log, on for the test, shows
    the URL with the token rubbed out. The request goes by http.client, which logs nothing of its own."""
    import http.client

    token = issuer.token(audience=AUDIENCE, scope="tools")
    with gateway_for(issuer) as served:
        logged.access()
        connection = http.client.HTTPConnection("127.0.0.1", int(served.url.rsplit(":", 1)[1]), timeout=10)
        connection.request("GET", f"/tools?access_token={token}")
        answer = connection.getresponse()
        body = json.loads(answer.read())
        connection.close()
    assert answer.status == 400 and "Authorization: Bearer" in body["error"]
    assert [line for line in logged if "/tools?access_token=[redacted]" in line]
    assert not [line for line in logged if token in line]


def test_settings_refuse_what_would_weaken_the_check():
    from gateway.identity.config import OAuthInvalid, parse

    base = {"issuer": "https://idp.example", "audience": "https://gw.example"}
    for changes, said in (({"algorithms": ["HS256"]}, "HS256 refused"), ({"algorithms": ["none"]}, "none refused"),
                          ({"issuer": "http://idp.example"}, "https URL"), ({"leeway_s": 3600}, "leeway_s"),
                          ({"rules": [{"toolsets": ["x"]}]}, "needs a condition"),
                          ({"rules": [{"scope": "x", "admin": "false"}]}, "true or false"),
                          ({"rules": [{"scope": "x"}]}, "grants nothing"), ({"audiences": []}, "unknown key")):
        with pytest.raises(OAuthInvalid, match=said):
            parse({**base, **changes})
