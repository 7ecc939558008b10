"""``GET /openapi.json`` and schemathesis against it: every REST route answers only what the document says."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from fake_llm import FakeLLM
from fuzz_support import FuzzServer, fuzz
from hypothesis import strategies as st
from openapi_spec_validator import validate
from schemathesis.specs.openapi import checks as openapi_checks
from support import serving

from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.server.rest.openapi import document
from gateway.settings import ApiKey, Settings, hash_key

REST_ROUTES = {"/healthz": {"get"}, "/status": {"get"}, "/tools": {"get"}, "/tools/search": {"get"}, "/tools/{tool_id}": {"get"},
               "/tools/{tool_id}/call": {"post"}, "/admin/reload": {"post"}, "/v1/chat/completions": {"post"},
               "/v1/models": {"get"}, "/openapi.json": {"get"}}
READER_KEY = "reader-key-for-fuzzing"
CHECKS = [schemathesis.checks.not_a_server_error, openapi_checks.status_code_conformance,
          openapi_checks.content_type_conformance, openapi_checks.response_schema_conformance,
          openapi_checks.response_headers_conformance]


def test_document_is_valid_openapi_31_listing_every_rest_route(fuzz_server: FuzzServer) -> None:
    """The served document is valid OpenAPI 3.1 and lists every REST route with its methods."""
    answer = fuzz_server.client.get("/openapi.json")
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    served = answer.json()
    validate(served)
    assert served["openapi"].startswith("3.1")
    assert {path: set(methods) for path, methods in served["paths"].items()} == REST_ROUTES


def test_document_declares_the_error_shape_and_every_client_error_status(fuzz_server: FuzzServer) -> None:
    """Errors are documented as {"error", "status"} with the 304/400/401/403/404/413/422 answers the routes give."""
    served = fuzz_server.client.get("/openapi.json").json()
    assert served["components"]["schemas"]["Error"]["required"] == ["error", "status"]
    documented = {status for path in served["paths"].values() for operation in path.values()
                  for status in operation["responses"]}
    assert {"304", "400", "403", "404", "413", "422"} <= documented
    keyed = document(Settings(definitions=fuzz_server.definitions, api_keys=(ApiKey("k", hash_key("k")),)))
    validate(keyed)
    assert "401" in keyed["paths"]["/tools"]["get"]["responses"]
    assert keyed["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


@pytest.fixture(scope="module")
def keyed_server(fuzz_server: FuzzServer, always_llm: FakeLLM) -> Iterator[str]:
    """The same tools and provider behind API keys: READER_KEY may use the math toolset only."""
    provider = {"kind": "openai", "base_url": always_llm.openai_url, "model": "fake-gpt", "max_retries": 0}
    keys = (ApiKey("reader", hash_key(READER_KEY), toolsets=("math",)),
            ApiKey("admin", hash_key("admin-key-for-fuzzing"), admin=True))
    settings = Settings(definitions=fuzz_server.definitions, reload=False, api_keys=keys,
                        providers={"default": provider})
    with serving(create_app(Gateway(settings)), lifespan="on") as server:
        yield server.url


def test_document_is_public_with_auth_on_and_names_no_tool(keyed_server: str, fuzz_server: FuzzServer) -> None:
    """With API keys on, the document needs none: it describes the API, not the catalog, and names no tool."""
    answer = httpx.get(keyed_server + "/openapi.json", timeout=30)
    refused = httpx.get(keyed_server + "/tools", timeout=30)
    assert answer.status_code == 200 and refused.status_code == 401
    assert answer.json()["security"] == [{"bearer": []}]
    tool_ids = list(fuzz_server.gateway.catalog.tools)
    assert tool_ids and not [tool_id for tool_id in tool_ids if f'"{tool_id}"' in answer.text]


def load_schema(url: str, tool_ids: list[str]) -> schemathesis.BaseSchema:
    """The served document; tool ids are drawn from the served tools half the time, so calls reach real tools."""
    loaded = schemathesis.openapi.from_url(url + "/openapi.json")

    @loaded.hook
    def flatmap_path_parameters(context: object, path_parameters: dict[str, Any]) -> st.SearchStrategy:
        if not path_parameters or "tool_id" not in path_parameters:
            return st.just(path_parameters)
        drawn = st.one_of(st.just(path_parameters["tool_id"]), st.sampled_from(tool_ids))
        return drawn.map(lambda tool_id: {**path_parameters, "tool_id": tool_id})

    return loaded


@pytest.fixture
def api_schema(fuzz_server: FuzzServer) -> schemathesis.BaseSchema:
    return load_schema(fuzz_server.url, sorted(fuzz_server.gateway.catalog.tools))


@pytest.fixture
def keyed_api_schema(keyed_server: str, fuzz_server: FuzzServer) -> schemathesis.BaseSchema:
    return load_schema(keyed_server, sorted(fuzz_server.gateway.catalog.tools))


schema = schemathesis.pytest.from_fixture("api_schema")
keyed_schema = schemathesis.pytest.from_fixture("keyed_api_schema")


@schema.parametrize()
@fuzz(25)
def test_every_route_answers_as_documented(case: schemathesis.Case) -> None:
    """Schemathesis: no 5xx, and every status, content type, header and body conforms to /openapi.json."""
    case.call_and_validate(checks=CHECKS, timeout=30)


@keyed_schema.parametrize()
@fuzz(10)
def test_every_route_answers_as_documented_with_auth_on(case: schemathesis.Case) -> None:
    """Schemathesis with a key limited to one toolset: hidden tools are 404s, admin routes 403s, all documented."""
    case.call_and_validate(checks=CHECKS, headers={"Authorization": f"Bearer {READER_KEY}"}, timeout=30)


def test_unknown_route_and_method_keep_the_error_shape(fuzz_server: FuzzServer) -> None:
    """Routes and methods outside the document answer 404/405 in the same JSON error shape."""
    for answer, status in ((fuzz_server.client.get("/no-such-route"), 404),
                           (fuzz_server.client.delete("/tools"), 405)):
        assert answer.status_code == status
        assert answer.json() == {"error": answer.json()["error"], "status": status}
