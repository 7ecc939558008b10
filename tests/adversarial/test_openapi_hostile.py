"""Hostile OpenAPI documents: whatever a document says (Jinja in its paths, server URLs or parameter names,
references that fan out, point off the document or at other files, ids 10,000 characters long), the gateway
builds in bounded time, fetches nothing, renders none of it as a template, and reports problems in words."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from sources.openapi_apis import Recorder
from support import serving

from gateway.catalog.build import build_catalog
from gateway.definitions.load import load_definitions
from gateway.errors import DefinitionsInvalid
from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings

SECRET = "leak-me-7f3a9c"


@pytest.fixture
def recorder() -> Iterator[tuple[Recorder, str]]:
    recorder = Recorder()
    with serving(recorder.app()) as server:
        yield recorder, server.url


def document(server: str, paths: dict, schemas: dict | None = None) -> dict:
    return {"openapi": "3.1.0", "info": {"title": "hostile", "version": "1"}, "servers": [{"url": server}],
            "paths": paths, "components": {"schemas": schemas or {}}}


def operation(operation_id: str, **extra) -> dict:
    return {"operationId": operation_id, "responses": {"200": {"description": "ok"}}, **extra}


def definitions(tmp_path: Path, doc: dict, source: str = "", security: dict | None = None) -> Path:
    root = tmp_path / "defs"
    root.mkdir()
    (root / "api.json").write_text(json.dumps(doc))
    openapi = json.dumps({"spec": "api.json", **({"security": security} if security else {})})
    (root / "api.yaml").write_text(f"sources:\n  - id: hostile\n    openapi: {openapi}\n" + source)
    return root


def test_jinja_in_paths_and_parameter_names_is_sent_as_written_never_rendered(tmp_path, recorder, monkeypatch):
    """`{{ ... }}` in a document's path reaches the upstream as those characters: a document is data, never a
    template (no secret, no 49); a cookie parameter named with one, which no cookie can be named, is left out."""
    monkeypatch.setenv("LEAKME", SECRET)
    seen, url = recorder
    cookie = {"name": "{{ secrets.LEAKME }}", "in": "cookie", "schema": {"type": "string"}}
    doc = document(url, {
        "/a/{{ 7*7 }}/{id}": {"get": operation("undeclared")},  # `{ 7*7 }` reads as an undeclared parameter
        "/a/{{ secrets.LEAKME }}/{id}": {"get": operation("templated", parameters=[
            {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
            {"name": " secrets.LEAKME ", "in": "path", "required": True, "schema": {"type": "string"}}, cookie])},
        "/b{{id}": {"get": operation("braces", parameters=[
            {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}])},
    })
    gateway = Gateway(Settings(definitions=definitions(tmp_path, doc), reload=False))
    with serving(create_app(gateway)) as served:
        assert "undeclared" not in gateway.catalog.tools
        assert "{{ secrets.LEAKME }}" not in gateway.catalog.tools["templated"].definition.input_schema["properties"]
        for tool, arguments in (("templated", {"id": "x", " secrets.LEAKME ": "7*7"}),
                                ("braces", {"id": "y"})):
            response = httpx.post(f"{served.url}/tools/{tool}/call", json=arguments, timeout=30)
            assert response.status_code == 200, response.text
    sent = json.dumps(seen.requests)
    assert len(seen.requests) == 2, sent
    # The Host header names the recorder's port, which may hold "49" by chance: 49 is looked for without it.
    rendered = json.dumps([{**request, "headers": {k: v for k, v in request["headers"].items() if k != "host"}}
                           for request in seen.requests])
    assert SECRET not in sent and "49" not in rendered, sent
    assert "7*7" in seen.requests[0]["path"] and seen.requests[0]["path"].endswith("/x"), sent


def test_jinja_in_the_server_url_is_never_rendered(tmp_path, recorder, monkeypatch):
    """A server URL holding `{{ ... }}` is never a template: the secret it names is not read, nothing is sent
    with it, and the tool is served or refused with a problem."""
    monkeypatch.setenv("LEAKME", SECRET)
    seen, url = recorder
    doc = document(url + "/{{ secrets.LEAKME }}", {"/x": {"get": operation("x")}})
    try:
        gateway = Gateway(Settings(definitions=definitions(tmp_path, doc), reload=False))
    except DefinitionsInvalid:
        return  # refused: nothing can be sent
    with serving(create_app(gateway)) as served:
        httpx.post(f"{served.url}/tools/x/call", json={}, timeout=30)
    assert SECRET not in json.dumps(seen.requests)


def test_references_fanning_out_over_many_operations_build_in_bounded_time(tmp_path):
    """Thirty schemas each referencing the next twice, used by 300 operations of a 60 KB document: every
    operation is served (within the default wait for sources), with a warning that the document's schemas were
    cut short."""
    schemas = {f"d{i}": {"type": "object", "properties": {"l": {"$ref": f"#/components/schemas/d{i + 1}"},
                                                         "r": {"$ref": f"#/components/schemas/d{i + 1}"}}}
               for i in range(30)}
    schemas["d30"] = {"type": "string"}
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/d0"}}}}
    doc = document("http://127.0.0.1:9", {f"/p{i}": {"post": operation(f"op{i}", requestBody=body)}
                                          for i in range(300)}, schemas)
    root = definitions(tmp_path, doc)
    catalog = build_catalog(load_definitions(root), Settings(definitions=root))
    assert len(catalog.tools) == 300, [str(w) for w in catalog.warnings]
    assert any("expand past" in w.message for w in catalog.warnings)


def test_remote_and_file_references_are_problems_and_never_fetched(tmp_path, recorder):
    """A $ref to a URL (a live server here) or to a file outside the document is a problem where it is written;
    the server is never asked for it."""
    seen, url = recorder
    (tmp_path / "secret.json").write_text('{"x": {"type": "string"}}')
    doc = document("http://127.0.0.1:9", {"/x": {"post": operation("x", requestBody={"content": {
        "application/json": {"schema": {"type": "object", "properties": {
            "remote": {"$ref": f"{url}/schema.json#/x"},
            "file": {"$ref": "../../secret.json#/x"}}}}}})}})
    root = definitions(tmp_path, doc)
    with pytest.raises(DefinitionsInvalid) as caught:
        build_catalog(load_definitions(root), Settings(definitions=root))
    messages = " ".join(p.message for p in caught.value.problems)
    assert "schema.json" in messages and "secret.json" in messages and "outside the document" in messages
    assert seen.requests == []


def test_an_operation_id_of_10000_characters_is_a_problem_with_a_short_fix(tmp_path):
    """A 10,000-character operationId is a problem whose suggested id is valid and short, never a crash."""
    doc = document("http://127.0.0.1:9", {"/x": {"get": operation("o" * 10_000)}, "/y": {"get": operation("y")}})
    root = definitions(tmp_path, doc)
    with pytest.raises(DefinitionsInvalid) as caught:
        build_catalog(load_definitions(root), Settings(definitions=root))
    [problem] = caught.value.problems
    assert "is 10000 characters long" in problem.message
    suggested = problem.message.rsplit("{id: ", 1)[1].split("}")[0]
    assert len(suggested) <= 64 and suggested.startswith("ooo"), suggested


def test_a_parameter_named_like_a_body_property_keeps_both(tmp_path, recorder):
    """A query parameter and a body property of the same name are two arguments: each goes where it belongs."""
    seen, url = recorder
    body = {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "properties": {"id": {"type": "string"}, "body": {"type": "string"}}}}}}
    doc = document(url, {"/x": {"post": operation("x", requestBody=body, parameters=[
        {"name": "id", "in": "query", "schema": {"type": "string"}},
        {"name": "body", "in": "query", "schema": {"type": "string"}}])}})
    gateway = Gateway(Settings(definitions=definitions(tmp_path, doc), reload=False))
    schema = gateway.catalog.tools["x"].definition.input_schema
    assert set(schema["properties"]) == {"id", "body", "request_body"}, schema  # the body is not flattened
    with serving(create_app(gateway)) as served:
        arguments = {"id": "q-id", "body": "q-body", "request_body": {"id": "b-id", "body": "b-body"}}
        response = httpx.post(f"{served.url}/tools/x/call", json=arguments, timeout=30)
        assert response.status_code == 200 and not response.json()["is_error"], response.text
    assert seen.requests[-1]["query"] == [["id", "q-id"], ["body", "q-body"]], seen.requests
    assert seen.requests[-1]["json"] == {"id": "b-id", "body": "b-body"}, seen.requests


def test_server_variables_are_fixed_at_build_and_never_an_argument(tmp_path, recorder):
    """A server URL with variables (`{host}`, `{port}`, whose enums name other hosts) is fixed to their defaults
    when the tools are built: a parameter of the same name is an argument sent where the document puts it, and
    never moves the call."""
    seen, url = recorder
    port = url.rsplit(":", 1)[1]
    doc = document("http://{host}:{port}/api", {"/x": {"get": operation("x", parameters=[
        {"name": "host", "in": "query", "schema": {"type": "string"}},
        {"name": "port", "in": "header", "schema": {"type": "string"}}])}})
    doc["servers"][0]["variables"] = {"host": {"default": "127.0.0.1", "enum": ["127.0.0.1", "169.254.169.254"]},
                                      "port": {"default": port, "enum": [port, "80"]}}
    gateway = Gateway(Settings(definitions=definitions(tmp_path, doc), reload=False))
    with serving(create_app(gateway)) as served:
        answer = httpx.post(f"{served.url}/tools/x/call", json={"host": "169.254.169.254", "port": "80"}, timeout=30)
        assert answer.status_code == 200 and not answer.json()["is_error"], answer.text
    [request] = seen.requests
    assert request["path"] == "/api/x" and request["query"] == [["host", "169.254.169.254"]]
    assert request["headers"]["port"] == "80"


def test_a_parameter_named_like_a_security_scheme_is_never_an_argument(tmp_path, recorder, monkeypatch):
    """A header, query or cookie parameter with the name (in any case) of the apiKey scheme the source gives a
    secret for is not offered to the model, and a warning says so: the upstream receives one value, the secret's,
    never the model's before it."""
    monkeypatch.setenv("API_KEY", SECRET)
    seen, url = recorder
    doc = document(url, {
        "/h": {"get": operation("h", security=[{"in_header": []}], parameters=[
            {"name": "x-api-key", "in": "header", "schema": {"type": "string"}}])},
        "/q": {"get": operation("q", security=[{"in_query": []}], parameters=[
            {"name": "API_KEY", "in": "query", "schema": {"type": "string"}}])},
        "/c": {"get": operation("c", security=[{"in_cookie": []}], parameters=[
            {"name": "SESSION", "in": "cookie", "schema": {"type": "string"}},
            {"name": "page", "in": "query", "schema": {"type": "string"}}])},
    })
    doc["components"]["securitySchemes"] = {"in_header": {"type": "apiKey", "in": "header", "name": "X-Api-Key"},
                                            "in_query": {"type": "apiKey", "in": "query", "name": "api_key"},
                                            "in_cookie": {"type": "apiKey", "in": "cookie", "name": "session"}}
    secret = "{{ secrets.API_KEY }}"
    root = definitions(tmp_path, doc, security={"in_header": secret, "in_query": secret, "in_cookie": secret})
    gateway = Gateway(Settings(definitions=root, reload=False))
    for tool, parameter in (("h", "x-api-key"), ("q", "API_KEY"), ("c", "SESSION")):
        assert parameter not in gateway.catalog.tools[tool].definition.input_schema["properties"], tool
        assert any(f"parameter '{parameter}' is where security scheme" in w.message and w.severity == "warning"
                   for w in gateway.catalog.warnings), [str(w) for w in gateway.catalog.warnings]
    with serving(create_app(gateway)) as served:
        for tool, parameter in (("h", "x-api-key"), ("q", "API_KEY"), ("c", "SESSION")):
            refused = httpx.post(f"{served.url}/tools/{tool}/call", json={parameter: "model-chose"}, timeout=30)
            assert refused.json()["is_error"] and "unexpected property" in refused.json()["error"], refused.text
            answer = httpx.post(f"{served.url}/tools/{tool}/call", json={}, timeout=30)
            assert answer.status_code == 200 and not answer.json()["is_error"], answer.text
    assert "model-chose" not in json.dumps([seen.requests, seen.header_lists])
    header, _, cookie = seen.header_lists
    assert [value for name, value in header if name == "x-api-key"] == [SECRET], header
    assert seen.requests[1]["query"] == [["api_key", SECRET]], seen.requests[1]
    assert [value for name, value in cookie if name == "cookie"] == [f"session={SECRET}"], cookie


def test_jinja_in_query_parameter_and_body_property_names_is_sent_as_written(tmp_path, recorder, monkeypatch):
    """A query parameter and a body property named `{{ ... }}` build and reach the upstream under those very
    characters (never rendered); a header parameter so named, which no header can carry, is left out with a
    warning."""
    monkeypatch.setenv("LEAKME", SECRET)
    seen, url = recorder
    body = {"required": True, "content": {"application/json": {"schema": {
        "type": "object", "properties": {"{{ 7*7 }}": {"type": "string"}}}}}}
    doc = document(url, {"/x": {"post": operation("x", requestBody=body, parameters=[
        {"name": "{{ secrets.LEAKME }}", "in": "query", "schema": {"type": "string"}},
        {"name": "{{ secrets.LEAKME }}", "in": "header", "schema": {"type": "string"}}])}})
    gateway = Gateway(Settings(definitions=definitions(tmp_path, doc), reload=False))
    schema = gateway.catalog.tools["x"].definition.input_schema
    assert set(schema["properties"]) == {"{{ secrets.LEAKME }}", "{{ 7*7 }}"}, schema
    assert any("header parameter '{{ secrets.LEAKME }}' cannot be sent as a header name" in w.message
               for w in gateway.catalog.warnings), [str(w) for w in gateway.catalog.warnings]
    with serving(create_app(gateway)) as served:
        arguments = {"{{ secrets.LEAKME }}": "q", "{{ 7*7 }}": "b"}
        answer = httpx.post(f"{served.url}/tools/x/call", json=arguments, timeout=30)
        assert answer.status_code == 200 and not answer.json()["is_error"], answer.text
    [request] = seen.requests
    assert request["query"] == [["{{ secrets.LEAKME }}", "q"]] and request["json"] == {"{{ 7*7 }}": "b"}, request
    assert SECRET not in json.dumps(seen.requests)


PROXY_AND_CONNECTION_HEADERS = ["Forwarded", "X-Forwarded-For", "x-forwarded-host", "X-Original-URL",
                                "X-Rewrite-URL", "Proxy-Authorization", "proxy-connection", "Cookie", "Upgrade",
                                "TE", "Connection", "Keep-Alive", "Trailer", "Transfer-Encoding", "Content-Length",
                                "HOST"]


def test_header_parameters_for_proxies_and_the_connection_are_never_arguments(tmp_path, recorder):
    """Header parameters a proxy reads as where a call comes from or goes (Forwarded, X-Forwarded-*, X-Original-URL,
    Proxy-*), or that the connection and the body decide (Upgrade, TE, Content-Length, ...), or a second Cookie
    header, are left out of the tool's arguments with a warning each, in any case; the others are sent."""
    seen, url = recorder
    parameters = [{"name": name, "in": "header", "schema": {"type": "string"}}
                  for name in [*PROXY_AND_CONNECTION_HEADERS, "X-Request-Id"]]
    doc = document(url, {"/x": {"get": operation("x", parameters=parameters)}})
    gateway = Gateway(Settings(definitions=definitions(tmp_path, doc), reload=False))
    assert list(gateway.catalog.tools["x"].definition.input_schema["properties"]) == ["X-Request-Id"]
    warned = " ".join(w.message for w in gateway.catalog.warnings)
    assert all(f"header parameter '{name}' " in warned for name in PROXY_AND_CONNECTION_HEADERS), warned
    with serving(create_app(gateway)) as served:
        answer = httpx.post(f"{served.url}/tools/x/call", json={"X-Request-Id": "r-1"}, timeout=30)
        assert answer.status_code == 200 and not answer.json()["is_error"], answer.text
    [headers] = seen.header_lists
    assert ("x-request-id", "r-1") in headers, headers


def test_a_reference_cycle_in_a_document_is_expanded_to_a_bound_never_a_recursion(tmp_path):
    """Component schemas whose references go round (A -> B -> A, C: allOf [C]) are expanded a few levels and
    then stand as a plain object: the tool is served and checks its arguments (no $ref left to go round)."""
    schemas = {"A": {"$ref": "#/components/schemas/B"}, "B": {"$ref": "#/components/schemas/A"},
               "C": {"allOf": [{"$ref": "#/components/schemas/C"}]}}
    body = {"content": {"application/json": {"schema": {"type": "object", "properties": {
        "a": {"$ref": "#/components/schemas/A"}, "c": {"$ref": "#/components/schemas/C"}}}}}}
    root = definitions(tmp_path, document("http://127.0.0.1:9", {"/x": {"post": operation("x", requestBody=body)}},
                                          schemas))
    validator = build_catalog(load_definitions(root), Settings(definitions=root)).tools["x"].validator
    assert list(validator.iter_errors({"a": {}, "c": {}})) == []
    assert sorted(list(e.absolute_path) for e in validator.iter_errors({"a": 1, "c": 2})) == [["a"], ["c"]]


COOKIE_VALUES = {  # a model's value → what the upstream reads as the cookie's value (still percent-encoded)
    "a; admin=1": "a%3B%20admin=1",
    "x\r\nX-Injected: 1": "x%0D%0AX-Injected:%201",
    'Zoë "q" \\ ,': "Zo%C3%AB%20%22q%22%20%5C%20%2C",
    "tok+/=%41": "tok+/=%41",  # cookie-octets, already one cookie-value: sent as written
}


def test_a_cookie_parameter_is_exactly_one_cookie_whatever_its_value(tmp_path, recorder):
    """A cookie parameter's value holding `;`, a line break, quotes, a backslash, a comma or non-ASCII is sent as
    exactly that one cookie, everything outside RFC 6265's cookie-octets percent-encoded: the upstream never sees
    a cookie the value named (`admin`) nor a header it added; arrays and objects are OpenAPI's form style,
    unexploded, encoded the same way."""
    seen, url = recorder
    doc = document(url, {"/x": {"get": operation("x", parameters=[
        {"name": "sid", "in": "cookie", "schema": {"type": "string"}}])},
        "/y": {"get": operation("y", parameters=[
            {"name": "tags", "in": "cookie", "schema": {"type": "array", "items": {"type": "string"}}},
            {"name": "prefs", "in": "cookie", "schema": {"type": "object"}}])}})
    gateway = Gateway(Settings(definitions=definitions(tmp_path, doc), reload=False))
    with serving(create_app(gateway)) as served:
        for arguments in [{"sid": value} for value in COOKIE_VALUES] + [
                {"tags": ["x", "y; admin=2"], "prefs": {"admin": 1, "b": "c,d"}}]:
            answer = httpx.post(f"{served.url}/tools/{'x' if 'sid' in arguments else 'y'}/call", json=arguments,
                                timeout=30)
            assert answer.status_code == 200 and not answer.json()["is_error"], answer.text
    assert [request["cookies"] for request in seen.requests] == [{"sid": sent} for sent in COOKIE_VALUES.values()] + [
        {"tags": "x%2Cy%3B%20admin=2", "prefs": "admin%2C1%2Cb%2Cc%2Cd"}]
    assert all("x-injected" not in request["headers"] for request in seen.requests), seen.requests


def test_cookie_parameters_and_an_api_key_cookie_are_one_cookie_header(tmp_path, recorder, monkeypatch):
    """Every cookie parameter of an operation and its apiKey cookie reach the upstream in one Cookie header, an
    omitted or null optional one left out (never `theme=` nor the whole header lost)."""
    monkeypatch.setenv("COOKIE_KEY", SECRET)
    seen, url = recorder
    doc = document(url, {"/x": {"get": operation("x", security=[{"session": []}], parameters=[
        {"name": "sid", "in": "cookie", "required": True, "schema": {"type": "string"}},
        {"name": "theme", "in": "cookie", "schema": {"type": ["string", "null"]}},
        {"name": "X-Lang", "in": "cookie", "schema": {"type": "string"}}])}})
    doc["components"]["securitySchemes"] = {"session": {"type": "apiKey", "in": "cookie", "name": "session"}}
    root = definitions(tmp_path, doc, security={"session": "{{ secrets.COOKIE_KEY }}"})
    gateway = Gateway(Settings(definitions=root, reload=False))
    with serving(create_app(gateway)) as served:
        for arguments in ({"sid": "s1", "theme": "dark", "X-Lang": "nb"}, {"sid": "s2", "theme": None}):
            answer = httpx.post(f"{served.url}/tools/x/call", json=arguments, timeout=30)
            assert answer.status_code == 200 and not answer.json()["is_error"], answer.text
    assert [[value for name, value in headers if name == "cookie"] for headers in seen.header_lists] == [
        [f"sid=s1; theme=dark; X-Lang=nb; session={SECRET}"], [f"sid=s2; session={SECRET}"]]


def test_a_cookie_parameter_no_cookie_can_be_named_is_left_out(tmp_path, recorder):
    """A cookie parameter whose name is not a token (`a; admin`, `{{ x }}`), which would name other cookies, is
    left out of the tool's arguments with a warning; the operation's other cookies are sent."""
    seen, url = recorder
    doc = document(url, {"/x": {"get": operation("x", parameters=[
        {"name": name, "in": "cookie", "schema": {"type": "string"}} for name in ("a; admin", "{{ x }}", "ok")])}})
    gateway = Gateway(Settings(definitions=definitions(tmp_path, doc), reload=False))
    assert list(gateway.catalog.tools["x"].definition.input_schema["properties"]) == ["ok"]
    warned = " ".join(w.message for w in gateway.catalog.warnings)
    assert all(f"cookie parameter '{name}' cannot be sent as a cookie name" in warned
               for name in ("a; admin", "{{ x }}")), warned
    with serving(create_app(gateway)) as served:
        answer = httpx.post(f"{served.url}/tools/x/call", json={"ok": "1"}, timeout=30)
        assert answer.status_code == 200 and not answer.json()["is_error"], answer.text
    assert seen.requests[0]["cookies"] == {"ok": "1"}, seen.requests


def test_a_header_parameter_with_a_line_break_is_an_error_naming_the_argument(tmp_path, recorder):
    """A header parameter's value holding CR or LF is an error result naming the argument (never a 500, never a
    second header upstream): nothing is sent; a non-ASCII value is sent as UTF-8."""
    seen, url = recorder
    doc = document(url, {"/x": {"get": operation("x", parameters=[
        {"name": "X-Trace", "in": "header", "schema": {"type": "string"}}])}})
    gateway = Gateway(Settings(definitions=definitions(tmp_path, doc), reload=False))
    with serving(create_app(gateway)) as served:
        for value in ("a\r\nX-Injected: 1", "a\nb", "a\rb"):
            answer = httpx.post(f"{served.url}/tools/x/call", json={"X-Trace": value}, timeout=30)
            assert answer.status_code == 200 and answer.json()["is_error"], answer.text
            assert ("header 'X-Trace' contains a line break or control character (from argument 'X-Trace')"
                    in answer.json()["error"]), answer.text
        assert seen.requests == []
        answer = httpx.post(f"{served.url}/tools/x/call", json={"X-Trace": "Zoë"}, timeout=30)
        assert answer.status_code == 200 and not answer.json()["is_error"], answer.text
    [headers] = seen.header_lists
    assert ("x-trace", "Zoë".encode().decode("latin-1")) in headers, headers
