"""The REST surface against a real server: listings, ETags, calls, and one JSON error shape for every failure."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import httpx
import pytest
from support import CONSOLE

EXAMPLE_IDS = {"example-tool", "search_stations", "get_station", "add_reading", "get_lights", "change_state",
               "square_root", "sum", "task_form_read", "task_form_fill", "get_time", "diff_time"}

FAILING_TOOLS = {
    "python/failing.py": '''
        from gateway import ToolError


        def refuse(reason: str) -> str:
            raise ToolError(f"Refused: {reason}.")


        def crash() -> str:
            raise RuntimeError("secret internals: /etc/passwd")


        def whoami(conversation_id: str | None = None, user: str | None = None) -> dict:
            return {"conversation_id": conversation_id, "user": user}
        ''',
    "failing.yaml": '''
        tools:
          - id: refuse
            name: Refuse
            user_description: Always refuses.
            ai_description: Always refuses, saying why.
            binding: {python: "failing:refuse"}
          - id: crash
            name: Crash
            user_description: Always crashes.
            ai_description: Always crashes.
            binding: {python: "failing:crash"}
          - id: whoami
            name: Who am I
            user_description: Says who calls.
            ai_description: Returns the conversation id and user of the call.
            binding: {python: "failing:whoami"}
        ''',
}


@pytest.fixture
def client(server):
    with httpx.Client(base_url=server.url, timeout=10) as http:
        yield http


@pytest.fixture
def failing(start_server, write_definitions):
    """A server whose tools refuse (ToolError), crash (RuntimeError) and echo their call context."""
    served = start_server(write_definitions(FAILING_TOOLS))
    with httpx.Client(base_url=served.url, timeout=10) as http:
        yield http


def test_healthz_answers_ok(client):
    """GET /healthz is 200 with a JSON status while the server serves."""
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_status_reports_version_tool_count_definitions_and_last_reload(client, server):
    """GET /status names the catalog version and tool count and, for a loopback caller with auth off, the
    definitions directory and the last reload's outcome."""
    body = client.get("/status").json()
    assert body["version"] == server.gateway.catalog.version
    assert body["tools"] == len(EXAMPLE_IDS)
    assert body["definitions"] == str(server.gateway.settings.definitions)
    assert body["last_reload"]["ok"] is True and body["last_reload"]["problems"] == []


def test_status_shows_a_failed_reload_with_file_line_col(start_server, examples_dir):
    """After a reload that fails, /status shows each problem as file:line:col while the old catalog serves."""
    served = start_server(examples_dir)
    version = served.gateway.catalog.version
    (examples_dir / "math.yaml").write_text("tools:\n  - id: 'not an id'\n")
    assert httpx.post(f"{served.url}/admin/reload", auth=CONSOLE).status_code == 422
    body = httpx.get(f"{served.url}/status").json()
    assert body["version"] == version and body["last_reload_ok"] is False
    assert any(p["text"].startswith("math.yaml:2:") for p in body["last_reload"]["problems"])


def test_tools_lists_every_example_tool_with_its_fields(client):
    """GET /tools lists every shipped tool with id, names, descriptions, scope and schemas."""
    tools = {tool["id"]: tool for tool in client.get("/tools").json()["tools"]}
    assert set(tools) == EXAMPLE_IDS
    total = tools["sum"]
    assert total["name"] == "Sum" and total["scope"] == "server" and total["toolsets"] == ["math"]
    assert total["input_schema"]["required"] == ["a", "b"]
    assert tools["diff_time"]["output_schema"]["required"] == ["seconds", "minutes", "hours", "days"]
    assert tools["task_form_read"]["scope"] == "client"


def test_tools_filters_by_toolset_and_tag(client):
    """?toolset= and ?tag= keep the tools in any of the given sets (repeated or comma-separated)."""
    def ids(query: str) -> set[str]:
        return {tool["id"] for tool in client.get("/tools" + query).json()["tools"]}

    assert ids("?toolset=math") == {"sum", "square_root"}
    assert ids("?toolset=math,time") == ids("?toolset=math&toolset=time") == {"sum", "square_root", "get_time",
                                                                             "diff_time"}
    assert ids("?tag=langchain4j") == {"sum", "square_root"}
    assert ids("?toolset=home&tag=langchain4j") == set()
    assert ids("?tag=no-such-tag") == set()


def test_tools_in_a_provider_format(client):
    """?format= gives the provider's declarations (with diagnostics), filtered like the plain listing; an
    unknown format is a 400."""
    body = client.get("/tools?format=openai&toolset=math").json()
    assert body["format"] == "openai" and body["diagnostics"] == []
    assert {tool["function"]["name"] for tool in body["tools"]} == {"sum", "square_root"}
    anthropic = client.get("/tools?format=anthropic").json()["tools"]
    assert len(anthropic) == len(EXAMPLE_IDS) and all("input_schema" in tool for tool in anthropic)
    response = client.get("/tools?format=cobol")
    assert response.status_code == 400 and "openai" in response.json()["error"]


def test_listings_carry_the_catalog_version_as_etag_and_honour_if_none_match(client, server):
    """/tools and /tools/{id} send ETag "<version>" ("<version>-gzip" for a listing sent compressed, as httpx asks
    for it); If-None-Match with it (plain, weak, in a list or *) is a 304 without a body, and any other tag gets
    the full 200."""
    version = server.gateway.catalog.version
    for path, etag in (("/tools", f'"{version}-gzip"'), ("/tools?format=gemini", f'"{version}-gzip"'),
                       ("/tools/sum", f'"{version}"')):
        response = client.get(path)
        assert response.status_code == 200 and response.headers["etag"] == etag
        for match in (etag, f"W/{etag}", f'"other", {etag}', "*"):
            not_modified = client.get(path, headers={"If-None-Match": match})
            assert not_modified.status_code == 304 and not_modified.content == b""
            assert not_modified.headers["etag"] == etag
        assert client.get(path, headers={"If-None-Match": '"stale"'}).status_code == 200


def test_etag_changes_when_the_catalog_does(start_server, examples_dir):
    """After a reload that changes the tools, the old ETag no longer matches and the new listing is sent."""
    served = start_server(examples_dir)
    old = httpx.get(f"{served.url}/tools").headers["etag"]
    math = examples_dir / "math.yaml"
    math.write_text(math.read_text().replace("name: Sum", "name: Addition"))
    assert httpx.post(f"{served.url}/admin/reload", auth=CONSOLE).json()["changed"] is True
    response = httpx.get(f"{served.url}/tools", headers={"If-None-Match": old})
    assert response.status_code == 200 and response.headers["etag"] != old
    assert "Addition" in {tool["name"] for tool in response.json()["tools"]}


def test_get_one_tool_and_unknown_tool(client):
    """GET /tools/{id} is that tool's listing entry; an unknown id is a 404 that suggests close ids."""
    assert client.get("/tools/sum").json()["id"] == "sum"
    response = client.get("/tools/summ")
    assert response.status_code == 404
    assert response.json() == {"error": "Unknown tool 'summ'. Did you mean: sum?", "status": 404, "tool": "summ",
                               "did_you_mean": ["sum"]}


def test_call_returns_the_result_and_the_text_an_llm_reads(client):
    """POST /tools/{id}/call takes a JSON object, a JSON string holding one, or no body for a tool without
    parameters, and answers 200 with the structured result and its text."""
    assert client.post("/tools/sum/call", json={"a": 1, "b": 2}).json() == {
        "tool": "sum", "is_error": False, "result": 3.0, "text": "3.0"}
    assert client.post("/tools/sum/call", json=json.dumps({"a": 1.5, "b": 2})).json()["result"] == 3.5
    lights = client.post("/tools/get_lights/call").json()
    assert lights["is_error"] is False and [light["id"] for light in lights["result"]] == [1, 2, 3]
    diff = client.post("/tools/diff_time/call",
                       json={"start": "2024-01-01T00:00:00+00:00", "end": "2024-01-02T12:00:00+00:00"}).json()
    assert diff["result"]["hours"] == 36.0


def test_call_with_bad_arguments_is_an_error_result_naming_what_is_wrong(client):
    """Arguments that do not match the schema give 200 with is_error and a message naming each path."""
    body = client.post("/tools/sum/call", json={"a": "one"}).json()
    assert body["is_error"] is True and body["result"] is None
    assert "at $.a: expected number, got string \"one\"" in body["error"]
    assert "missing required property 'b'" in body["error"]
    assert body["text"] == body["error"]


def test_tool_failures_are_error_results_and_a_crash_hides_its_internals(failing):
    """A ToolError's message reaches the caller as is_error; an unexpected exception becomes an is_error result
    with a reference, never its message or a traceback."""
    refused = failing.post("/tools/refuse/call", json={"reason": "no budget"})
    assert refused.status_code == 200 and refused.json()["error"] == "Refused: no budget."
    crashed = failing.post("/tools/crash/call")
    assert crashed.status_code == 200 and crashed.json()["is_error"] is True
    assert "internal error" in crashed.json()["error"] and "ref" in crashed.json()["error"]
    assert "/etc/passwd" not in crashed.text and "Traceback" not in crashed.text


def test_call_context_comes_from_headers(failing):
    """X-Conversation-Id and X-User reach the tool's context parameters."""
    body = failing.post("/tools/whoami/call", headers={"X-Conversation-Id": "c-42", "X-User": "ada"}).json()
    assert body["result"] == {"conversation_id": "c-42", "user": "ada"}


def test_call_unknown_tool_is_404(client):
    """POST to an unknown tool is a 404 with suggestions, before its body is even read."""
    response = client.post("/tools/square-root/call", json={"x": 4})
    assert response.status_code == 404 and response.json()["did_you_mean"] == ["square_root"]


@pytest.mark.parametrize("body", [b"{", b'{"a": 1,}', b"\xff\xfe{}", b"[" * 200_000])
def test_malformed_body_is_400(client, body):
    """A body that is not JSON (or not UTF-8, or nested deeper than the parser goes) is a 400 with the reason."""
    response = client.post("/tools/sum/call", content=body)
    assert response.status_code == 400
    assert response.json()["status"] == 400 and "Request body is not" in response.json()["error"]


def test_oversized_body_is_413(start_server, examples_dir):
    """A body over max_body_bytes is a 413, whether its Content-Length says so or it streams past the limit."""
    served = start_server(examples_dir, max_body_bytes=1000)
    big = json.dumps({"a": 1, "b": 2, "pad": "x" * 2000}).encode()
    with httpx.Client(base_url=served.url) as http:
        assert http.post("/tools/sum/call", content=big).status_code == 413
        streamed = http.post("/tools/sum/call", content=(big[i:i + 100] for i in range(0, len(big), 100)))
        assert streamed.status_code == 413 and "over the limit of 1000 bytes" in streamed.json()["error"]
        assert http.post("/tools/sum/call", json={"a": 1, "b": 2}).json()["result"] == 3.0


def test_oversized_body_is_refused_while_it_streams(start_server, examples_dir):
    """The 413 comes as soon as the limit is passed: the server does not wait for the rest of the body."""
    served = start_server(examples_dir, max_body_bytes=1000)
    port = int(served.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"POST /tools/sum/call HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n")
        chunk = b"x" * 600
        sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk) * 2)  # 1200 bytes, and the body never ends
        answer = sock.recv(65536)
    assert answer.startswith(b"HTTP/1.1 413 ")


def test_unknown_route_and_wrong_method_answer_in_the_same_json_shape(client):
    """Routing errors (404, 405) use the one JSON error shape too."""
    assert client.get("/nowhere").json() == {"error": "Not Found", "status": 404}
    wrong = client.get("/tools/sum/call")
    assert wrong.status_code == 405 and wrong.json()["status"] == 405


def test_an_unexpected_server_error_is_a_json_500_with_a_reference_only(start_server, examples_dir):
    """A bug in the server becomes a 500 whose JSON body names a log reference, not the exception."""
    served = start_server(examples_dir)

    class BrokenCatalog:
        def __getattr__(self, name: str) -> object:
            raise RuntimeError("secret internals")

    served.gateway.rebuilder.catalog = BrokenCatalog()
    response = httpx.get(f"{served.url}/tools")
    assert response.status_code == 500
    assert response.json()["error"].startswith("Internal server error; ref ")
    assert "secret" not in response.text and "Traceback" not in response.text


def test_bad_requests_do_not_take_the_server_down(client, server):
    """After a barrage of malformed, oversized, unknown and crashing requests (and raw garbage on the socket),
    the server still answers and calls still work."""
    for _ in range(3):
        client.post("/tools/sum/call", content=b"{")
        client.post("/tools/sum/call", json={"a": []})
        client.post("/tools/nope/call", json={})
        client.post("/tools/sum/call", content=b"x" * (server.gateway.settings.max_body_bytes + 1))
        client.request("PATCH", "/tools")
    port = int(server.url.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"\x00\x01 NOT HTTP AT ALL\r\n\r\n")
        sock.recv(1024)
    assert client.get("/healthz").status_code == 200
    assert client.post("/tools/sum/call", json={"a": 2, "b": 2}).json()["result"] == 4.0


def test_origins_other_than_the_allowed_ones_are_refused(start_server, examples_dir: Path):
    """A browser Origin not allowed gets 403, a loopback page too once allowed_origins is written; the listed origins
    and requests with no Origin pass. With auth off, a non-loopback Host (DNS rebinding) gets 421."""
    served = start_server(examples_dir, allowed_origins=("https://app.example.com",))
    with httpx.Client(base_url=served.url) as http:
        assert http.get("/tools", headers={"Origin": "https://evil.example"}).status_code == 403
        assert http.get("/tools", headers={"Origin": "http://localhost:5173"}).status_code == 403
        assert http.get("/tools", headers={"Origin": "https://app.example.com"}).status_code == 200
        assert http.get("/tools", headers={"Origin": "https://app.example.com:8443"}).status_code == 403
        rebound = http.get("/tools", headers={"Host": "evil.example:8000"})
        assert rebound.status_code == 421 and "loopback" in rebound.json()["error"]


def test_filtered_listings_are_kept_a_bounded_number_at_a_time(server):
    """A filtered listing asked again is the same bytes, made once; callers asking for ever new filters keep at
    most FILTERED_KEPT of them per catalog, while the listings stay right. A label no tool carries selects nothing
    and is no part of what is kept: made-up tags of 60 KB each leave one small entry, not 60 KB each."""
    from itertools import combinations

    from gateway.server.rest.surface import FILTERED_KEPT

    with httpx.Client(base_url=server.url, timeout=30) as http:
        first = http.get("/tools?toolset=math").content
        everything = http.get("/tools").json()["tools"]
        tags = sorted({tag for tool in everything for tag in tool["tags"]})
        toolsets = sorted({label for tool in everything for label in tool["toolsets"]})
        asked = [(toolset, chosen) for toolset in toolsets for n in (1, 2) for chosen in combinations(tags, n)]
        assert len(asked) > FILTERED_KEPT
        for toolset, chosen in asked:
            expected = {tool["id"] for tool in everything
                        if toolset in tool["toolsets"] and set(chosen) & set(tool["tags"])}
            listed = http.get("/tools", params={"toolset": toolset, "tag": ",".join(chosen)}).json()["tools"]
            assert {tool["id"] for tool in listed} == expected
        for index in range(FILTERED_KEPT + 36):
            made_up = f"no-such-tag-{index}-" + "x" * 60_000
            assert http.get("/tools", params={"tag": made_up}).json() == {"tools": []}
            assert http.get("/tools", params={"tag": f"{made_up},langchain4j"}).json() == \
                http.get("/tools?tag=langchain4j").json()
        assert http.get("/tools?toolset=math").content == first
        assert {t["id"] for t in json.loads(first)["tools"]} == {"sum", "square_root"}
    kept = server.gateway.catalog.memo("rest:filtered", dict)
    assert 0 < len(kept) <= FILTERED_KEPT
    assert max(len(repr(key)) for key in kept) < 200


def test_a_search_filter_keeps_only_the_labels_the_catalog_has(server):
    """A search's made-up tags find nothing alone and change nothing beside a real one; the reach a search keeps for
    its filter is keyed by the catalog's labels, not the request's 60 KB."""
    made_up = "no-such-tag-" + "y" * 60_000
    with httpx.Client(base_url=server.url, timeout=30) as http:
        assert http.get("/tools/search", params={"q": "square root", "tag": made_up}).json() == {"tools": []}
        found = http.get("/tools/search", params={"q": "square root", "tag": f"{made_up},langchain4j"}).json()
        assert found == http.get("/tools/search", params={"q": "square root", "tag": "langchain4j"}).json()
        assert found["tools"][0]["id"] == "square_root"
    from gateway.search.index import made

    assert max(len(repr(key)) for key in made(server.gateway.catalog)._reaches) < 200
