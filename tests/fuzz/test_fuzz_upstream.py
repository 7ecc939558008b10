"""What an upstream answers an HTTP-bound tool, fuzzed: any status, content type and body, the secret echoed back.

An upstream is a remote service: its answer is input. Whatever it sends — any status, a body that is JSON or
not, lone surrogate escapes, a declared type that lies — a call is a 200 result or error result over REST (never
a 500), and the secret the tool sends upstream never comes back, in any of the encodings a careless service
might echo it in (raw, JSON-escaped, percent- or form-encoded, base64).
"""

from __future__ import annotations

import base64
import json
import urllib.parse
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fake_llm import Servers
from fuzz_support import fuzz, json_values
from hypothesis import given
from hypothesis import strategies as st
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from support import serving

from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings

SECRET = 'Sup3r/S3cr+t&V4l=ue xyz"q'
RESPONSES = {"raw": "{}", "json": "{expect: json}", "selected": "{select: \"$.items[*].name\"}",
             "templated": '{template: "{% for i in result %}{{ i }};{% endfor %}"}'}
TOOLS = "tools:\n" + "".join(f"""\
  - id: {name}
    name: {name}
    user_description: Calls the fuzzed upstream.
    ai_description: Calls the fuzzed upstream.
    input_schema: {{type: object, properties: {{q: {{type: string}}}}}}
    binding:
      http:
        url: "UPSTREAM_URL/answer"
        query: {{q: "{{{{ args.q }}}}"}}
        headers: {{Authorization: "Bearer {{{{ secrets.FUZZ_UPSTREAM_TOKEN }}}}"}}
        retries: 0
        timeout_s: 10
        response: {response}
""" for name, response in RESPONSES.items())


@dataclass
class Upstream:
    """Answers whatever the test put in ``next``; ``{secret}`` in the body becomes the Authorization it got."""

    url: str = ""
    next: tuple[int, str, bytes] = (200, "application/json", b"{}")

    async def answer(self, request: Request) -> Response:
        status, content_type, body = self.next
        authorization = request.headers.get("authorization", "")
        return Response(body.replace(b"{secret}", authorization.encode()), status, media_type=content_type)


@pytest.fixture(scope="module")
def upstream(servers: Servers) -> Upstream:
    served = Upstream()
    served.url = servers.start(Starlette(routes=[Route("/answer", served.answer, methods=["GET"])]))
    return served


@pytest.fixture(scope="module")
def gateway_url(upstream: Upstream, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    root: Path = tmp_path_factory.mktemp("upstream-tools")
    (root / "tools.yaml").write_text(TOOLS.replace("UPSTREAM_URL", upstream.url))
    with pytest.MonkeyPatch.context() as env:
        env.setenv("FUZZ_UPSTREAM_TOKEN", SECRET)
        settings = Settings(definitions=root, reload=False, allowed_secrets=("FUZZ_UPSTREAM_TOKEN",))
        with serving(create_app(Gateway(settings)), lifespan="on") as server:
            yield server.url


# How a careless service could echo the Authorization header it got (the test server substitutes {secret}).
ECHOES = [b"{secret}", b'{"error": "bad token {secret}"}', b'{"items": [{"name": "{secret}"}]}']
surrogate_json = st.sampled_from([b'{"a": "\\ud800 x"}', b'{"items": [{"name": "\\udfff"}]}', b'"\\ud83d"'])
bodies = st.one_of(json_values.map(lambda value: json.dumps(value).encode()), st.binary(max_size=40),
                   st.sampled_from(ECHOES), surrogate_json)
statuses = st.sampled_from([200, 200, 201, 204, 301, 400, 401, 404, 418, 429, 500, 502, 503])
content_types = st.sampled_from(["application/json", "text/plain", "text/html", "application/octet-stream"])
SECRET_SPELLINGS = [SECRET, json.dumps(SECRET)[1:-1], urllib.parse.quote(SECRET), urllib.parse.quote_plus(SECRET),
                    base64.b64encode(SECRET.encode()).decode()]


@fuzz(60)
@given(tool=st.sampled_from(sorted(RESPONSES)), status=statuses, content_type=content_types, body=bodies)
def test_any_upstream_answer_is_a_result_and_never_shows_the_secret(upstream: Upstream, gateway_url: str, tool: str,
                                                                   status: int, content_type: str, body: bytes
                                                                   ) -> None:
    """Any status, type and body from the upstream: a 200 result or error result, with no spelling of the secret."""
    upstream.next = (status, content_type, b"" if status in (204, 301) else body)
    answer = httpx.post(f"{gateway_url}/tools/{tool}/call", json={"q": "x"}, timeout=30)
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert isinstance(result["is_error"], bool) and isinstance(result["text"], str), result
    leaked = [spelling for spelling in SECRET_SPELLINGS if spelling in answer.text]
    assert not leaked, (leaked, answer.text)
