"""An upstream call whose SSE stream closes before its answer (SEP-1699: a server that frees the connection) is
resumed as the spec says: after the stream's ``retry:`` delay, a GET with ``Last-Event-ID`` (the conformance
suite's ``sse-retry`` scenario checks the timing); one that never answers, or refuses the GET, ends the call with
an error result after a bounded number of attempts, never a hang. The upstream is a real server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from mcp_upstreams import gateway_serving, http_source, sources_yaml
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from support import serving

from gateway.upstream.mcp.fastcall import MAX_RESUME_FAILURES, MAX_RESUMES

TOOL = {"name": "slow", "description": "Answers on a resumed stream.", "inputSchema": {"type": "object"}}


def upstream(resume: str) -> tuple[Starlette, list[str]]:
    """A 2025-11-25 stateless upstream whose tools/call stream sends a priming event (an id, retry: 10) and closes.
    A GET with Last-Event-ID then: ``answers`` (the call's answer), ``closes`` (another priming event, no answer,
    closed again: forever), or ``refuses`` (405). Each Last-Event-ID it was sent is kept."""
    resumed: list[str] = []
    pending: dict[str, object] = {}

    def sse(*events: str) -> Response:
        return Response("".join(events), media_type="text/event-stream")

    async def mcp(request: Request) -> Response:
        if request.method == "GET":
            last = request.headers.get("last-event-id")
            if last is None:
                return Response(status_code=405)
            resumed.append(last)
            if resume == "refuses":
                return Response(status_code=405)
            if resume == "closes":
                return sse(f"id: e{len(resumed) + 1}\nretry: 10\ndata: \n\n")
            answer = {"jsonrpc": "2.0", "id": pending["id"],
                      "result": {"content": [{"type": "text", "text": "resumed"}], "isError": False}}
            return sse("id: e9\nretry: 10\ndata: \n\n", f"event: message\nid: e10\ndata: {json.dumps(answer)}\n\n")
        message = json.loads(await request.body())
        if "id" not in message:
            return Response(status_code=202)
        method, result = message["method"], {}
        if method == "initialize":
            result = {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "resuming", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [TOOL]}
        elif method == "tools/call":
            pending["id"] = message["id"]
            return sse("id: e1\nretry: 10\ndata: \n\n")
        return JSONResponse({"jsonrpc": "2.0", "id": message["id"], "result": result})

    return Starlette(routes=[Route("/mcp", mcp, methods=["GET", "POST", "DELETE"])]), resumed


@pytest.fixture(autouse=True)
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOL_GATEWAY_STATE_DIR", str(tmp_path / "state"))


def call_through_gateway(tmp_path: Path, resume: str) -> tuple[dict, list[str]]:
    app, resumed = upstream(resume)
    with serving(app) as server:
        root = tmp_path / "defs"
        root.mkdir()
        (root / "upstreams.yaml").write_text(sources_yaml(http_source("resuming", f"{server.url}/mcp")))
        with gateway_serving(root) as served:
            answer = httpx.post(f"{served.url}/tools/slow/call", json={}, timeout=60).json()
    return answer, resumed


def test_a_call_whose_stream_closes_before_its_answer_is_resumed_with_last_event_id(tmp_path):
    answer, resumed = call_through_gateway(tmp_path, "answers")
    assert not answer["is_error"] and answer["text"] == "resumed", answer
    assert resumed == ["e1"]


@pytest.mark.parametrize(("resume", "attempts"), [("closes", MAX_RESUMES), ("refuses", MAX_RESUME_FAILURES)])
def test_a_stream_that_never_brings_the_answer_ends_the_call_after_bounded_attempts(tmp_path, resume, attempts):
    answer, resumed = call_through_gateway(tmp_path, resume)
    assert answer["is_error"] and "MCP server 'resuming'" in answer["text"], answer
    assert len(resumed) == attempts
