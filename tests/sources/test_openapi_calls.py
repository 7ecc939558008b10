"""OpenAPI sources end to end: documents shaped like real APIs, served by the gateway, called through REST, and
the requests that reach a real upstream server checked."""

from __future__ import annotations

import base64
import textwrap
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from openapi_apis import PETSTORE, Recorder, tracker_for
from support import serving

from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings

SOURCES = """
sources:
  - id: pets
    openapi: {spec: specs/petstore.yaml, security: {api_key: "{{ secrets.PET_KEY }}"}}
    prefix: pet_
    exclude: [delete_*]
    toolsets: [pets]
    tools:
      showPetById: {id: pet_show, toolsets: [reading], ai_description: Look up one pet by its id.}
    hidden:
      listPets: {X-Request-Id: {context: conversation_id}}
      updateOwner: {email: owner@example.com}
  - id: tracker
    openapi: {spec: specs/tracker.json, security: {basic: "{{ secrets.TRACKER_USER }}:{{ secrets.TRACKER_TOKEN }}"}}
    include: ["issues/*", search/issues]
    tools:
      issues/list-for-repo: {id: list_issues}
      issues/create: {id: create_issue}
      issues/update: {id: update_issue}
      search/issues: {id: search_issues}
    hidden:
      issues/list-for-repo: {owner: acme}
"""


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[Recorder, str]]:
    recorder = Recorder()
    with serving(recorder.app()) as server:
        yield recorder, server.url


@pytest.fixture(scope="module")
def definitions(upstream, tmp_path_factory) -> Path:
    _, url = upstream
    root = tmp_path_factory.mktemp("openapi") / "defs"
    (root / "specs").mkdir(parents=True)
    (root / "specs" / "petstore.yaml").write_text(PETSTORE.replace("BASE", url), encoding="utf-8")
    (root / "specs" / "tracker.json").write_text(tracker_for(int(url.rsplit(":", 1)[1])), encoding="utf-8")
    (root / "api.yaml").write_text(textwrap.dedent(SOURCES), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def gateway_url(definitions) -> Iterator[str]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PET_KEY", "pet-secret")
        patch.setenv("TRACKER_USER", "octo")
        patch.setenv("TRACKER_TOKEN", "tracker-secret")
        gateway = Gateway(Settings(definitions=definitions, reload=False))
        with serving(create_app(gateway), lifespan="on") as server:
            yield server.url


def _call(gateway_url: str, tool: str, arguments: dict, **headers: str) -> dict:
    response = httpx.post(f"{gateway_url}/tools/{tool}/call", json=arguments, headers=headers, timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def _last(upstream) -> dict:
    return upstream[0].requests[-1]


def test_the_listing_has_the_selected_tools_with_overrides(gateway_url):
    """include/exclude/prefix/overrides decide the ids, toolsets and descriptions REST lists."""
    tools = {t["id"]: t for t in httpx.get(f"{gateway_url}/tools", timeout=10).json()["tools"]}
    assert set(tools) == {"pet_listPets", "pet_createPet", "pet_show", "pet_updateOwner", "list_issues",
                          "create_issue", "update_issue", "search_issues"}
    assert tools["pet_show"]["toolsets"] == ["reading"] and tools["pet_listPets"]["toolsets"] == ["pets"]
    assert tools["pet_show"]["ai_description"] == "Look up one pet by its id."
    assert tools["pet_listPets"]["annotations"] == {"read_only": True}
    assert "X-Request-Id" not in tools["pet_listPets"]["input_schema"]["properties"]
    assert "owner" not in tools["list_issues"]["input_schema"]["properties"]


def test_query_array_header_and_api_key_reach_the_upstream(gateway_url, upstream):
    """A query array repeats its key, a hidden header comes from the conversation, the API key from a secret."""
    result = _call(gateway_url, "pet_listPets", {"limit": 5, "tags": ["dog", "cat"]}, **{"X-Conversation-Id": "c-1"})
    assert not result["is_error"], result
    seen = _last(upstream)
    assert (seen["method"], seen["path"]) == ("GET", "/v1/pets")
    assert seen["query"] == [["limit", "5"], ["tags", "dog"], ["tags", "cat"]]
    assert seen["headers"]["x-request-id"] == "c-1" and seen["headers"]["x-api-key"] == "pet-secret"
    assert "pet-secret" not in str(result)


def test_a_path_parameter_is_encoded_as_one_segment(gateway_url, upstream):
    """A path argument holding '/' and '..' stays inside its segment of the fixed server's path."""
    assert not _call(gateway_url, "pet_show", {"petId": "../admin/x y"})["is_error"]
    # The server decodes the one segment it got; sent raw, "../" would have been resolved away (/v1/admin/...).
    assert _last(upstream)["path"] == "/v1/pets/../admin/x y"


def test_an_all_of_body_is_sent_whole_and_a_flat_body_by_its_fields(gateway_url, upstream):
    """An allOf body is the `body` argument; a plain object body is flattened, a hidden field fixed by the admin."""
    pet = {"name": "Rex", "tag": None, "family": [{"name": "Pup", "id": 2}]}
    assert not _call(gateway_url, "pet_createPet", {"body": pet})["is_error"]
    assert _last(upstream)["json"] == pet and _last(upstream)["method"] == "POST"
    assert not _call(gateway_url, "pet_updateOwner", {"petId": "7", "name": "Ann"})["is_error"]
    seen = _last(upstream)
    assert (seen["method"], seen["path"]) == ("PUT", "/v1/pets/7/owner")
    assert seen["json"] == {"name": "Ann", "email": "owner@example.com"}


def test_schema_rules_of_the_document_are_enforced_before_the_call(gateway_url, upstream):
    """maximum, the 3.0 boolean exclusiveMinimum and a missing required body field fail as argument errors."""
    count = len(upstream[0].requests)
    assert _call(gateway_url, "pet_listPets", {"limit": 500})["is_error"]
    assert _call(gateway_url, "pet_updateOwner", {"petId": "7", "name": "Ann", "age": 0})["is_error"]
    assert _call(gateway_url, "pet_createPet", {"body": {"tag": "x"}})["is_error"]
    assert len(upstream[0].requests) == count


def test_openapi_31_server_variables_basic_auth_and_a_one_of_body(gateway_url, upstream):
    """3.1: the server URL from its variables' defaults, HTTP basic from two secrets, a oneOf body passed through."""
    result = _call(gateway_url, "create_issue", {"owner": "o", "repo": "r", "body": {"template": "bug"}})
    assert not result["is_error"], result
    seen = _last(upstream)
    assert (seen["method"], seen["path"], seen["json"]) == ("POST", "/api/v3/repos/o/r/issues", {"template": "bug"})
    assert seen["headers"]["authorization"] == "Basic " + base64.b64encode(b"octo:tracker-secret").decode()
    assert _call(gateway_url, "create_issue", {"owner": "o", "repo": "r", "body": {"nothing": 1}})["is_error"]


def test_a_hidden_path_parameter_and_a_renamed_clashing_one(gateway_url, upstream):
    """A query parameter clashing with a path one is `<name>_query`; the hidden path one is the admin's value."""
    assert not _call(gateway_url, "list_issues", {"repo": "r", "state": "closed", "owner_query": "bob"})["is_error"]
    seen = _last(upstream)
    assert seen["path"] == "/api/v3/repos/acme/r/issues"
    assert seen["query"] == [["state", "closed"], ["owner", "bob"]]
    assert _call(gateway_url, "list_issues", {"repo": "r", "owner": "evil"})["is_error"]


def test_a_flat_31_body_keeps_null_and_leaves_out_what_was_not_given(gateway_url, upstream):
    """A `type: [string, "null"]` field sends null; fields the call omits are not sent at all."""
    result = _call(gateway_url, "update_issue", {"owner": "o", "repo": "r", "issue_number": 3, "title": None})
    assert not result["is_error"], result
    seen = _last(upstream)
    assert (seen["method"], seen["path"], seen["json"]) == ("PATCH", "/api/v3/repos/o/r/issues/3", {"title": None})


def test_a_recursive_filter_tree_is_accepted_and_sent(gateway_url, upstream):
    """A body whose schema refers to itself (filters of filters) is bounded in the schema and sent whole."""
    tree = {"filter": {"and": [{"field": "state", "equals": "open"}, {"or": [{"field": "a", "equals": "b"}]}]}}
    assert not _call(gateway_url, "search_issues", {"body": tree})["is_error"]
    seen = _last(upstream)
    assert seen["json"] == tree and "authorization" not in seen["headers"]  # `security: []`: no credentials


def test_status_shows_each_source(gateway_url):
    """/status lists each source with its kind, tool count, health and last refresh."""
    sources = {s["id"]: s for s in httpx.get(f"{gateway_url}/status", timeout=10).json()["sources"]}
    assert sources["pets"]["kind"] == "openapi" and sources["pets"]["tools"] == 4
    assert sources["tracker"]["tools"] == 4 and sources["tracker"]["health"] == "ok"
    assert sources["pets"]["stale"] is False and sources["pets"]["last_refresh"] > 0
