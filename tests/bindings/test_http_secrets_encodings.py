"""Secrets never leave the gateway, in any spelling: an upstream that echoes a secret it received (in a
header, in the query string, in a Basic credential) back in its answer, JSON-escaped, percent- or form-encoded
or in base64, has it redacted from results, error results and every log line; and a definition may read only
the environment variables it is allowed to (issue 10, item 5)."""

from __future__ import annotations

import base64
import json
import logging
import re
from urllib.parse import quote, quote_plus, urlencode

import pytest
from http_tools import http_tool
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from gateway import secrets
from gateway.errors import DefinitionsInvalid
from gateway.invoke import invoke

SECRET = 'Sup3r/S3cr+t&V4l=ue xyz"q'
NAME = "LEAKY_SECRET"
PADDING = "p" * 285  # puts each spelling across the 300-character cut of an error excerpt


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _spellings(request: Request) -> dict[str, str]:
    """What a careless service may echo of what it received (the secret came in the header, the query string
    and the Basic credential)."""
    value = request.headers["x-token"]
    credential = request.headers["authorization"].partition(" ")[2]
    return {
        "raw": value,
        "json error": json.dumps({"error": f"bad token Bearer {value}"}),
        "json": json.dumps(value),
        "json twice": json.dumps(json.dumps(value)),
        "percent": quote(value, safe=""),
        "percent path": quote(value),
        "lowercase percent": re.sub("%[0-9A-F]{2}", lambda match: match[0].lower(), quote(value, safe="")),
        "form": urlencode({"token": value}),
        "query as received": request.url.query,
        "repr": repr(value),
        "bytes repr": repr(value.encode()),
        "base64": _b64(value.encode()),
        "base64 after 1 byte": _b64(b"a" + value.encode()),
        "base64 after 2 bytes": _b64(b"ab" + value.encode()),
        "basic credential": credential,
        "basic decoded": base64.b64decode(credential).decode(),
        "authorization header": request.headers["authorization"],
    }


async def echo_error(request: Request) -> Response:
    """400 with the chosen spelling (after padding, if asked), and the secret in a header."""
    spelling = _spellings(request)[request.query_params["spell"]]
    padding = PADDING if request.query_params.get("pad") else ""
    return Response(f"{padding} {spelling}", status_code=400, headers={"x-echo": request.headers["x-token"]})


async def echo_ok(request: Request) -> Response:
    """200 with every spelling, as JSON data and as one text."""
    spellings = _spellings(request)
    return JSONResponse({"echo": spellings, "text": " ".join(spellings.values())})


@pytest.fixture(scope="module")
def leaky(serve_app) -> str:
    """An upstream that echoes the secret it receives back in every spelling."""
    app = Starlette(routes=[Route("/error", echo_error), Route("/ok", echo_ok)])
    return f"http://127.0.0.1:{serve_app(app)}"


@pytest.fixture
def leaky_tool(leaky, build_tools, monkeypatch):
    """A tool sending the secret as a header, a query parameter and a Basic credential."""
    monkeypatch.setenv(NAME, SECRET)

    def build(path: str):
        return build_tools(http_tool({
            "url": leaky + path,
            "headers": {"X-Token": "{{ secrets.LEAKY_SECRET }}",
                        "Authorization": "Basic {{ ('user:' ~ secrets.LEAKY_SECRET)|b64encode }}"},
            "query": {"token": "{{ secrets.LEAKY_SECRET }}", "spell": "{{ args.spell }}", "pad": "{{ args.pad }}"},
        }, {"spell": {"type": "string"}, "pad": {"type": "boolean"}}))

    return build


def _leaks(text: str) -> list[str]:
    """Pieces of the secret (in any text spelling, or in base64 at any offset) found in ``text``."""
    raw = SECRET.encode()
    pieces = ["S3cr", "V4l", "xyz"]  # in every textual spelling of the secret
    for skip in range(3):  # base64 of the secret as it appears inside a longer base64 text
        body = raw[skip:][:len(raw[skip:]) // 3 * 3]
        pieces.append(_b64(body)[4:16])
    pieces.append(_b64(b"user:" + raw)[8:])
    return [piece for piece in pieces if piece in text]


SPELLINGS = ["raw", "json error", "json", "json twice", "percent", "percent path", "lowercase percent", "form",
             "query as received", "repr", "bytes repr", "base64", "base64 after 1 byte", "base64 after 2 bytes",
             "basic credential", "basic decoded", "authorization header"]


@pytest.mark.parametrize("spell", SPELLINGS)
async def test_error_result_never_shows_the_secret(leaky_tool, spell):
    """An upstream's 400 echoing the secret (in this spelling) gives an error result with the secret redacted,
    also where the excerpt's cut falls inside it."""
    catalog = leaky_tool("/error")
    whole = await invoke(catalog, "t", {"spell": spell})
    assert whole.is_error and "HTTP 400" in whole.text and "[secret LEAKY_SECRET" in whole.text
    assert _leaks(whole.text) == [], whole.text
    cut = await invoke(catalog, "t", {"spell": spell, "pad": True})
    assert cut.is_error and cut.text.endswith("…") and _leaks(cut.text) == [], cut.text


async def test_result_never_shows_the_secret(leaky_tool):
    """A successful answer holding every spelling, as JSON members and as text, is redacted throughout."""
    result = await invoke(leaky_tool("/ok"), "t", {"spell": "raw"})
    assert not result.is_error, result.text
    assert _leaks(json.dumps(result.value)) == [] and _leaks(result.text) == []
    assert result.value["echo"]["raw"] == "[secret LEAKY_SECRET]"


def test_deeply_nested_values_are_redacted():
    """A value nested deeper than Python's recursion limit is redacted (keys too, order kept), not a
    RecursionError."""
    value: object = {"b": SECRET, SECRET: 1}
    for _ in range(5000):
        value = [value, 2.5]
    redacted = secrets.redact_value(value, {NAME: SECRET})
    for _ in range(5000):
        assert redacted[1] == 2.5
        redacted = redacted[0]
    assert redacted == {"b": f"[secret {NAME}]", f"[secret {NAME}]": 1}


async def test_logs_never_show_the_secret(leaky_tool, caplog):
    """Every log line at DEBUG (httpx's request line with the query, the gateway's own loggers, a traceback) has
    the secret redacted. Plain http goes on ``upstream.h1``, which logs nothing of a request (httpcore, which
    echoed headers at DEBUG, now only carries https)."""
    catalog = leaky_tool("/error")
    with caplog.at_level(logging.DEBUG):
        for spell in ("raw", "query as received", "basic credential"):
            await invoke(catalog, "t", {"spell": spell})
        logging.getLogger("gateway.invoke").warning("a call with %s", SECRET)
        try:
            raise ValueError(f"upstream said {SECRET}")
        except ValueError:
            logging.getLogger("gateway").exception("failed")
    assert any("HTTP Request: GET" in message for message in caplog.messages)
    assert _leaks(caplog.text) == [], caplog.text


def test_redaction_covers_every_encoding():
    """Each spelling the gateway or its libraries produce of a secret is replaced by the secret's name."""
    raw = SECRET.encode()
    for spelling in [SECRET, json.dumps(SECRET)[1:-1], json.dumps(SECRET, ensure_ascii=False)[1:-1],
                     quote(SECRET, safe=""), quote(SECRET), quote_plus(SECRET), _b64(raw)]:
        assert secrets.redact(f"<{spelling}>", {NAME: SECRET}) == f"<[secret {NAME}]>"
    for prefix in (b"", b"u:", b"us:", b"use:"):  # the secret at each offset inside a longer base64 text
        assert _leaks(secrets.redact(_b64(prefix + raw), {NAME: SECRET})) == []


@pytest.mark.parametrize(("name", "settings", "fragment"), [
    ("TOOL_GATEWAY_ADMIN_KEY", {}, "TOOL_GATEWAY_* variables are the gateway's own"),
    ("OTHER_TOKEN", {"allowed_secrets": ("WEATHER_TOKEN",)}, "not in the allowed_secrets setting"),
])
def test_definitions_may_not_read_forbidden_variables(build_tools, name, settings, fragment):
    """A template naming the gateway's own variable, or one outside `allowed_secrets`, is a load-time problem
    at the template's file:line:col, naming the variable."""
    tool = http_tool({"url": "http://127.0.0.1:9/x", "headers": {"Authorization": f"Bearer {{{{ secrets.{name} }}}}"}})
    with pytest.raises(DefinitionsInvalid) as caught:
        build_tools(tool, **settings)
    problems = [p for p in caught.value.problems if name in p.message]
    assert len(problems) == 1 and fragment in problems[0].message
    assert (problems[0].file, problems[0].line) == ("tools.yaml", 10)


def test_allowed_secrets_lets_listed_variables_be_read(build_tools, monkeypatch):
    """A variable listed in `allowed_secrets` may be read."""
    monkeypatch.setenv("WEATHER_TOKEN", "w-123456")
    tool = http_tool({"url": "http://127.0.0.1:9/x", "headers": {"X-Key": "{{ secrets.WEATHER_TOKEN }}"}})
    assert list(build_tools(tool, allowed_secrets=("WEATHER_TOKEN",)).tools) == ["t"]


def test_refusal_is_the_one_rule_for_every_secret_reference():
    """`secrets.refusal` says why a name may not be read under the settings, or None: what provider keys use."""
    from gateway.settings import Settings

    assert secrets.refusal("OPENAI_API_KEY", Settings()) is None
    assert "gateway's own" in secrets.refusal("TOOL_GATEWAY_API_KEY", Settings())
    assert "allowed_secrets" in secrets.refusal("OPENAI_API_KEY", Settings(allowed_secrets=("ANTHROPIC_KEY",)))
    with pytest.raises(secrets.SecretsMissing, match="gateway's own"):
        secrets.resolve({"TOOL_GATEWAY_ADMIN_KEY"}, {"TOOL_GATEWAY_ADMIN_KEY": "admin-key"})


def test_log_records_keep_their_shape_when_redacted(monkeypatch, caplog):
    """A record whose text arguments hold a secret keeps its arguments (redacted), so formatters that read them
    (uvicorn's access lines) still work; a secret only visible once formatted collapses the record to text."""
    monkeypatch.setenv(NAME, SECRET)
    secrets.remember({NAME})
    access = logging.getLogger("gateway.tests.access")  # (uvicorn.access itself does not propagate to caplog)
    with caplog.at_level(logging.INFO, logger=access.name):
        access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET", f"/tools?q={quote_plus(SECRET)}", "1.1", 200)
        access.info("got %s", [SECRET])
    shaped, collapsed = caplog.records
    assert shaped.args == ("127.0.0.1:5", "GET", f"/tools?q=[secret {NAME}]", "1.1", 200)
    assert collapsed.args == () and collapsed.getMessage() == f"got ['[secret {NAME}]']"
