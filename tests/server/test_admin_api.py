"""The admin console's API on a real server: who may use it, what each endpoint answers, and the live call feed."""

from __future__ import annotations

import json
import shutil
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from server_support import ADMIN_KEY, API_KEYS, READER_KEY
from support import CONSOLE, EXAMPLES

from gateway import secrets
from gateway.definitions.load import DEFAULT_LIMITS
from gateway.definitions.yamlsource import parse_yaml
from gateway.events import CallActivity
from gateway.observe.live import KEPT, QUEUE_SIZE, TEXT_CAP, LiveCalls
from gateway.server.admin import catalog as admin_catalog

ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}
READER = {"Authorization": f"Bearer {READER_KEY}"}
GET_ENDPOINTS = ("/admin/api/overview", "/admin/api/tools", "/admin/api/tools/sum", "/admin/api/problems",
                 "/admin/api/reloads", "/admin/api/calls", "/admin/api/files", "/admin/api/files/math.yaml")


@pytest.fixture
def definitions(tmp_path: Path) -> Path:
    """A private copy of the shipped examples (a test may change it)."""
    target = tmp_path / "tool-definitions"
    shutil.copytree(EXAMPLES, target, ignore=shutil.ignore_patterns("__pycache__"))
    return target


def admin_client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers=ADMIN, timeout=30, auth=CONSOLE)


@pytest.mark.parametrize("path", GET_ENDPOINTS)
def test_every_endpoint_needs_an_admin_key(auth_server, path):
    """With auth on: no key is 401, a key without admin rights is 403, the admin key gets 200 — on every endpoint."""
    assert httpx.get(auth_server.url + path).status_code == 401
    refused = httpx.get(auth_server.url + path, headers=READER)
    assert refused.status_code == 403 and refused.json() == {"error": "This operation needs an admin API key.",
                                                             "status": 403}
    assert httpx.get(auth_server.url + path, headers=ADMIN).status_code == 200


@pytest.mark.parametrize("method, path, body", [
    ("POST", "/admin/api/check", {"path": "math.yaml", "text": "tools: []\n"}),
    ("PUT", "/admin/api/files/math.yaml", {"text": "tools: []\n", "base_sha256": "0"}),
    ("POST", "/admin/api/files", {"path": "new.yaml", "template": "empty"}),
    ("GET", "/admin/api/calls/stream", None),
])
def test_writes_and_the_stream_need_an_admin_key_too(auth_server, method, path, body):
    """The editor's writes and the live stream refuse a missing key (401) and a non-admin key (403)."""
    assert httpx.request(method, auth_server.url + path, json=body).status_code == 401
    assert httpx.request(method, auth_server.url + path, json=body, headers=READER).status_code == 403


def test_with_auth_off_a_loopback_caller_may_use_the_console(server):
    """Without API keys, the console's API answers callers on loopback (the test client is one)."""
    for path in GET_ENDPOINTS:
        assert httpx.get(server.url + path).status_code == 200, path
    assert httpx.get(server.url + "/admin/api/overview").json()["auth"] is False


def test_the_page_and_its_assets_need_no_key(auth_server):
    """/admin/ is the static page (it asks for the key), with a policy that runs only the console's own scripts;
    its assets are served with their types, revalidated, never listed as a directory."""
    page = httpx.get(auth_server.url + "/admin/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert httpx.get(auth_server.url + "/admin", follow_redirects=True).status_code == 200
    script = httpx.get(auth_server.url + "/admin/static/api.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert script.headers["cache-control"] == "no-cache" and script.headers["x-content-type-options"] == "nosniff"
    for missing in ("/admin/static/", "/admin/static/nothing.js", "/admin/static/../server/admin/surface.py",
                    "/admin/static/%2e%2e/%2e%2e/server/admin/surface.py"):
        answer = httpx.get(auth_server.url + missing)
        assert answer.status_code == 404 and answer.json()["status"] == 404, missing


def test_overview_says_what_is_served_and_whether_files_may_be_edited(auth_server, shared_examples):
    """The overview gives the catalog version and size, the definitions directory, auth, the last reload, plugins
    and sources, and whether the editor may write."""
    overview = httpx.get(auth_server.url + "/admin/api/overview", headers=ADMIN).json()
    catalog = auth_server.gateway.catalog
    assert overview["version"] == catalog.version and overview["tools"] == len(catalog.tools)
    assert overview["definitions"] == str(shared_examples) and overview["auth"] is True
    assert overview["read_only"] is False and overview["read_only_reason"] is None
    assert overview["last_reload"]["ok"] is True
    assert overview["plugins"] == [] and overview["sources"] == []


def test_tools_are_listed_with_where_they_are_declared(auth_server, shared_examples):
    """Each tool is listed with scope, binding kind, toolsets, tags and the file and line of its `- id:` entry."""
    listed = {tool["id"]: tool for tool in httpx.get(auth_server.url + "/admin/api/tools", headers=ADMIN).json()["tools"]}
    assert set(listed) == set(auth_server.gateway.catalog.tools)
    total = listed["sum"]
    assert (total["scope"], total["binding"], total["toolsets"], total["file"], total["plugin"]) == (
        "server", "python", ["math"], "math.yaml", None)
    assert (shared_examples / "math.yaml").read_text().splitlines()[total["line"] - 1].strip() == "- id: sum"
    assert listed["search_stations"]["binding"] == "http"
    assert listed["example-tool"]["binding"] == "python+browser" and listed["example-tool"]["scope"] == "all"


def test_a_tool_in_full(auth_server):
    """One tool: descriptions, schemas, its declaration in each provider format, where it is declared, and its
    binding as written — an HTTP tool's URL template, not the address it renders to."""
    with admin_client(auth_server.url) as client:
        tool = client.get("/admin/api/tools/search_stations").json()
        assert tool["binding"] == {"kind": "http", "summary": "GET {{ gateway.base_url }}/demo/stations"}
        assert set(tool["formats"]) == {"mcp", "openai", "openai-strict", "openai-responses", "anthropic", "gemini"}
        assert tool["formats"]["openai-responses"]["name"] == "search_stations"
        assert tool["formats"]["mcp"]["name"] == "search_stations"
        assert tool["formats"]["openai"]["function"]["name"] == "search_stations"
        assert tool["input_schema"]["properties"]["query"]["type"] == "string"
        assert tool["declared"]["file"] == "http-demo.yaml" and tool["declared"]["line"] > 0
        assert tool["user_description"] and tool["ai_description"] and tool["toolsets"] == ["weather"]
        assert "figures" in tool and "examples" in tool
        python = client.get("/admin/api/tools/sum").json()
        assert python["binding"] == {"kind": "python", "summary": "math_tools:add"}
        unknown = client.get("/admin/api/tools/nope")
        assert unknown.status_code == 404 and unknown.json()["status"] == 404


def test_a_tool_shows_no_secret(start_server, definitions, monkeypatch):
    """A tool whose query and headers use a secret shows its method and URL, never the secret's value."""
    monkeypatch.setenv("CONSOLE_TEST_TOKEN", "value-of-the-console-secret")
    (definitions / "secret.yaml").write_text(textwrap.dedent("""\
        tools:
          - id: with_secret
            name: With secret
            user_description: Uses a secret.
            ai_description: Uses a secret.
            binding:
              http:
                url: "https://api.example.com/x"
                query: {key: "{{ secrets.CONSOLE_TEST_TOKEN }}"}
                headers: {Authorization: "Bearer {{ secrets.CONSOLE_TEST_TOKEN }}"}
        """))
    served = start_server(definitions)
    answer = httpx.get(served.url + "/admin/api/tools/with_secret")
    assert answer.json()["binding"]["summary"] == "GET https://api.example.com/x"
    assert "value-of-the-console-secret" not in answer.text


def test_problems_show_the_lines_around_them(start_server, definitions):
    """After a failed reload, each problem comes with the lines of its file around it (3 before and after), the
    problem's own line and column, read from the file as it is."""
    served = start_server(definitions)
    lines = [f"# line {n}" for n in range(1, 10)] + [
        "tools:", "  - id: broken", "    name: Broken", "    user_description: Broken.", "    ai_description: Broken.",
        "    binding: {python: 'nowhere:nothing'}", "    tags: [a]", "# after 1", "# after 2", "# after 3", "# after 4"]
    (definitions / "broken.yaml").write_text("\n".join(lines) + "\n")
    with admin_client(served.url) as client:
        assert client.post("/admin/reload").status_code == 422
        body = client.get("/admin/api/problems").json()
    assert body["last_reload"]["ok"] is False
    problem = next(p for p in body["problems"] if p["file"] == "broken.yaml")
    excerpt = problem["excerpt"]
    assert excerpt["line"] == problem["line"] and excerpt["column"] == problem["column"]
    assert excerpt["first_line"] == max(1, problem["line"] - 3)
    assert excerpt["lines"] == lines[excerpt["first_line"] - 1:problem["line"] + 3]
    assert "nowhere" in lines[problem["line"] - 1]  # the binding's line: lines 12 to 18 are shown


def test_reloads_are_listed_newest_first_with_what_they_changed(start_server, definitions):
    """The reload history starts with the first build and gains each reload, newest first, with the tools it
    added and whether it failed."""
    served = start_server(definitions)
    with admin_client(served.url) as client:
        text = (definitions / "math.yaml").read_text()
        (definitions / "math.yaml").write_text(text.replace("id: sum", "id: plus"))
        assert client.post("/admin/reload").status_code == 200
        (definitions / "math.yaml").write_text("tools: [")
        assert client.post("/admin/reload").status_code == 422
        reloads = client.get("/admin/api/reloads").json()["reloads"]
    failed, changed, first = reloads[:3]
    assert failed["ok"] is False and failed["problems"] and failed["changed"] is False
    assert changed["ok"] is True and changed["added"] == ["plus"] and changed["removed"] == ["sum"]
    assert first["initial"] is True and first["tools"] == len(served.gateway.catalog.tools)
    assert failed["at"] >= changed["at"] >= first["at"]


def test_recent_calls_and_one_call_in_detail(start_server, definitions):
    """A call made by a client shows in the recent calls (caller, surface, tool, outcome, duration) and, asked for
    by id, with its arguments and result."""
    served = start_server(definitions, api_keys=API_KEYS)
    assert httpx.post(served.url + "/tools/sum/call", json={"a": 2, "b": 3}, headers=READER).status_code == 200
    with admin_client(served.url) as client:
        summary = client.get("/admin/api/calls").json()["calls"][0]
        assert (summary["tool"], summary["caller"], summary["surface"], summary["outcome"]) == (
            "sum", "reader", "rest", "ok")
        assert summary["duration_ms"] >= 0 and "arguments" not in summary
        detail = client.get(f"/admin/api/calls/{summary['id']}").json()
        assert json.loads(detail["arguments"]) == {"a": 2, "b": 3} and detail["result"] == "5.0"
        assert client.get("/admin/api/calls/not-a-call").status_code == 404


def test_call_detail_redacts_secrets_and_respects_audit(start_server, definitions, monkeypatch):
    """A secret's value in a call's arguments or result is shown redacted; a tool with `audit: {arguments: false}`
    shows no arguments at all."""
    monkeypatch.setenv("CONSOLE_LIVE_SECRET", "live-secret-value-123")
    secrets.remember(["CONSOLE_LIVE_SECRET"])
    (definitions / "python" / "echo_tools.py").write_text(textwrap.dedent('''\
        def echo(text: str) -> str:
            """Echo.

            Args:
                text: what to echo.
            """
            return text
        '''))
    (definitions / "echo.yaml").write_text(textwrap.dedent("""\
        tools:
          - id: echo
            name: Echo
            user_description: Echo.
            ai_description: Echo.
            binding: {python: "echo_tools:echo"}
          - id: quiet_echo
            name: Quiet echo
            user_description: Echo.
            ai_description: Echo.
            binding: {python: "echo_tools:echo"}
            audit: {arguments: false}
        """))
    served = start_server(definitions)
    with admin_client(served.url) as client:
        assert client.post("/tools/echo/call", json={"text": "the live-secret-value-123"}).status_code == 200
        assert client.post("/tools/quiet_echo/call", json={"text": "private words"}).status_code == 200
        quiet, loud = client.get("/admin/api/calls").json()["calls"][:2]
        shown = client.get(f"/admin/api/calls/{loud['id']}")
        assert "live-secret-value-123" not in shown.text
        assert "[secret CONSOLE_LIVE_SECRET]" in shown.json()["arguments"]
        assert shown.json()["result"] == "the [secret CONSOLE_LIVE_SECRET]"
        hidden = client.get(f"/admin/api/calls/{quiet['id']}").json()
        assert hidden["arguments"] is None and hidden["arguments_hidden"] is True


def stream_lines(response: httpx.Response) -> Iterator[str]:
    yield from response.iter_lines()


def test_the_live_stream_gets_calls_made_by_another_client(start_server, definitions):
    """A reader of /admin/api/calls/stream receives `event: call` with the summary of a call another client
    makes."""
    served = start_server(definitions, api_keys=API_KEYS)
    with admin_client(served.url) as client, client.stream("GET", "/admin/api/calls/stream") as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        lines = stream_lines(response)
        assert next(lines).startswith(":")  # the head and a first comment: subscribed
        assert httpx.post(served.url + "/tools/sum/call", json={"a": 1, "b": 1}, headers=READER).status_code == 200
        event = next(line for line in lines if line.startswith("event:"))
        data = next(lines)
        assert event == "event: call" and data.startswith("data: ")
        summary = json.loads(data.removeprefix("data: "))
        assert (summary["tool"], summary["caller"], summary["outcome"]) == ("sum", "reader", "ok")


def test_the_live_stream_ends_when_the_feed_stops(start_server, definitions):
    """Stopping the live feed (the server going down) ends an open stream instead of leaving it to hold the
    server."""
    served = start_server(definitions)
    with admin_client(served.url) as client, client.stream("GET", "/admin/api/calls/stream") as response:
        lines = stream_lines(response)
        assert next(lines).startswith(":")
        served.gateway.observers["live"].stop()
        assert [line for line in lines if line.startswith("event:")] == []  # and the body ended
    again = httpx.get(served.url + "/admin/api/calls/stream", timeout=10)  # a new reader after stop: ends at once
    assert again.status_code == 200


def test_an_admin_key_may_call_every_tool(auth_server):
    """"Try it" calls tools through the normal call path with the admin key: it reaches tools of every toolset,
    also those a reader key cannot see."""
    with admin_client(auth_server.url) as client:
        for tool in ("sum", "get_time"):
            answer = client.post(f"/tools/{tool}/call", json={"a": 1, "b": 2} if tool == "sum" else {})
            assert answer.status_code == 200 and answer.json()["is_error"] is False, tool
    assert httpx.post(auth_server.url + "/tools/get_time/call", json={}, headers=READER).status_code == 404


def test_a_tool_shows_its_live_figures(start_server, definitions):
    """After calls, a tool's detail carries the SLO observer's figures for it (calls, p50/p95, error rate)."""
    served = start_server(definitions)
    if "slo" not in served.gateway.observers:
        pytest.skip("the SLO observer (gateway.observe.slo) is not attached on this gateway")
    with admin_client(served.url) as client:
        for _ in range(3):
            assert client.post("/tools/sum/call", json={"a": 1, "b": 2}).status_code == 200
        figures = client.get("/admin/api/tools/sum").json()["figures"]
        assert figures["calls"] == 3 and figures["errors"] == 0 and figures["p95_ms"] is not None
        assert client.get("/admin/api/tools/square_root").json()["figures"] is None


def ended_call(call_id: str, arguments: object = None) -> CallActivity:
    call = CallActivity("call", id=call_id, tool="sum", arguments=arguments)
    call.outcome = "ok"
    return call


async def test_a_slow_reader_misses_calls_and_never_holds_one():
    """A reader that does not read fills its bounded queue: further calls end at once and are counted as dropped
    for it, the calls it did get are still there to read, and the console keeps the newest KEPT calls."""
    live = LiveCalls()
    subscription = live.subscribe()
    for n in range(QUEUE_SIZE + 10):
        live.end(ended_call(f"call-{n}"))  # returns: never waits for the reader
    assert subscription.dropped == 10
    assert (await subscription.next(1))["id"] == "call-0"
    recent = live.recent()  # the newest KEPT, newest first
    assert len(recent) == KEPT and recent[0]["id"] == f"call-{QUEUE_SIZE + 9}"


async def test_a_call_ending_on_another_thread_reaches_the_reader():
    """A call that ends on a thread other than the reader's event loop is handed over to that loop."""
    live = LiveCalls()
    subscription = live.subscribe()
    thread = threading.Thread(target=live.end, args=(ended_call("from-a-thread"),))
    thread.start()
    thread.join()
    assert (await subscription.next(5))["id"] == "from-a-thread"


def test_large_arguments_are_kept_cut_short():
    """A call with a megabyte of arguments keeps their first TEXT_CAP characters only, marked as cut."""
    live = LiveCalls()
    live.end(ended_call("big", {"items": ["x" * 100] * 10_000}))
    detail = live.get("big").detail()
    assert len(detail["arguments"]) == TEXT_CAP and detail["arguments_truncated"] is True
    assert detail["arguments"].startswith('{"items": ["xxx')


@pytest.mark.parametrize("text", [
    "overrides: [{tool: a}]\ntools:\n- {id: a}\n- id: b\n  x: [1, 2]\n-\n  id: c\nother: [9]\n",
    "tools: [{id: a}, {id: b},\n  {id: c}]\n",
    "# comment\ntools:\n  - id: a\n    binding: &b\n      http: {url: 'x'}\n  - &t\n    id: b\n    binding: *b\n",
])
def test_tool_lines_from_parser_events_match_the_documents_positions(text):
    """The listing's fast line lookup (parser events) gives each tool the line the loader's own position lookup
    (the composed node tree) gives it."""
    document, _ = parse_yaml("x.yaml", text, DEFAULT_LIMITS)
    expected = [document.position(["tools", index])[0] for index in range(len(document.data["tools"]))]
    assert admin_catalog.item_lines(text) == expected


def test_a_reload_with_very_many_problems_keeps_a_bounded_record():
    """A reload's ids and problems are kept up to LISTED each in the history, the rest counted: a hundred broken
    reloads of a huge file must not hold millions of strings."""
    from types import SimpleNamespace

    from gateway.events import Event
    from gateway.observe.reloads import LISTED, Reloads
    from gateway.runtime.rebuild import ReloadOutcome

    gateway = SimpleNamespace(last_reload=ReloadOutcome(True, True, "v1"), catalog=SimpleNamespace(tools={}))
    reloads = Reloads(gateway)
    reloads.event(Event("reload", {"ok": False, "problems": [f"f.yaml:{n}:1: bad" for n in range(5_000)],
                                   "modified": [f"t{n}" for n in range(LISTED)]}))
    newest = reloads.history()[0]
    assert newest["problems"][:2] == ["f.yaml:0:1: bad", "f.yaml:1:1: bad"]
    assert len(newest["problems"]) == LISTED + 1 and newest["problems"][-1] == f"… and {5_000 - LISTED} more"
    assert newest["modified"] == [f"t{n}" for n in range(LISTED)]
