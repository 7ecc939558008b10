"""What callers put in front of the observability consumers (trace context, user names, tool names, arguments)
never breaks a request, a log line, an audit line or a metric: a real server on 127.0.0.1, with the gateway's own
log formatters, tracer and /metrics."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from fake_llm import FakeLLM, Reply, openai_provider
from mcp import Client
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from starlette.applications import Starlette
from starlette.routing import Route
from support import json_lines, serve_process, serving

from gateway.observe import otel, tracing
from gateway.observe.logs import JsonFormatter, TextFormatter
from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings

TOOLS = """
tools:
  - id: echo
    name: Echo
    user_description: Says the text back.
    ai_description: Says the text back.
    binding: {python: "echoing:echo"}
"""
FORGED = "eve\n2026-11-30 12:00:00,000 INFO gateway.calls: admin via rest: ok\x1b[2J\r"


@pytest.fixture
def definitions(write_definitions) -> Path:
    return write_definitions({"tools.yaml": TOOLS, "python/echoing.py": "def echo(text: str) -> str:\n    return text\n"})


def captured(log_handler: Callable[..., logging.Handler], formatter: logging.Formatter) -> io.StringIO:
    """What the call log writes through ``formatter`` from now on (``log_handler``: the fixture)."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(formatter)
    log_handler(handler, "gateway.calls", level=logging.INFO)
    return out


def chat_as(definitions: Path, user: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """One chat turn whose body names ``user`` and whose model calls ``echo`` once."""
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-test-adversary")
    llm = FakeLLM()
    with serving(Starlette(routes=[Route("/v1/chat/completions", llm.handle, methods=["POST"])])) as llm_server:
        llm.url = llm_server.url
        llm.answer(Reply(tool_calls=[("c1", "echo", {"text": "a\nb\x1b[31m"})]), Reply(content="done"))
        gateway = Gateway(Settings(definitions=definitions, reload=False,
                                   providers={"scripted": openai_provider(llm)}))
        with serving(create_app(gateway), lifespan="on") as served:
            answer = httpx.post(f"{served.url}/v1/chat/completions", timeout=30,
                                json={"user": user, "messages": [{"role": "user", "content": "echo"}]})
            assert answer.status_code == 200, answer.text


def test_a_json_call_log_line_stays_one_line_whatever_the_user_is_called(definitions, monkeypatch, log_handler):
    """A chat body's user holding a newline, a carriage return and an ANSI escape: the JSON call log is one
    line per call, the escape encoded."""
    out = captured(log_handler, JsonFormatter())
    chat_as(definitions, FORGED, monkeypatch)
    lines = out.getvalue().splitlines()
    assert len(lines) == 1, lines
    assert json.loads(lines[0])["user"] == FORGED and "\x1b" not in lines[0]


def test_audit_lines_stay_one_line_whatever_the_arguments_hold(definitions, tmp_path):
    """Arguments and an error text holding newlines, carriage returns and ANSI escapes (`tool-gateway serve`):
    every audit line is one JSON object, one per call, no raw escape in the file."""
    trail = tmp_path / "audit.jsonl"

    def run(url: str) -> None:
        for arguments in ({"text": FORGED}, {"text": 5, "\n\x1b[2J": FORGED}):
            assert httpx.post(f"{url}/tools/echo/call", json=arguments, timeout=10).status_code == 200

    serve_process(definitions, env={"TOOL_GATEWAY_AUDIT_LOG": str(trail)}, while_running=run)
    text = trail.read_text()
    events = json_lines(text)
    assert [e["outcome"] for e in events if e["event"] == "call"] == ["ok", "invalid_arguments"], events
    assert "\x1b" not in text and "\r" not in text


def test_the_audit_trail_outlives_a_logging_reconfiguration(definitions, tmp_path):
    """Served by uvicorn with its own logging configuration (which closes every logging handler of the
    process), the audit trail still gets its line for a call."""
    trail = tmp_path / "audit.jsonl"
    gateway = Gateway(Settings(definitions=definitions, reload=False, audit_log=str(trail)))
    with serving(create_app(gateway), lifespan="on") as served:
        assert httpx.post(f"{served.url}/tools/echo/call", json={"text": "hi"}, timeout=10).status_code == 200
    assert '"event": "call"' in trail.read_text().replace('"event":"call"', '"event": "call"')


def test_a_text_call_log_line_cannot_be_forged_by_a_user_name(definitions, monkeypatch, log_handler):
    """A chat body's user holding a newline, a carriage return and an ANSI escape: the text call log is still
    one line per call, with those characters escaped."""
    out = captured(log_handler, TextFormatter())
    chat_as(definitions, FORGED, monkeypatch)
    text = out.getvalue()
    assert text.count("\n") == 1 and "\r" not in text and "\x1b" not in text, repr(text)


@pytest.mark.parametrize("traceparent", ["x" * 60_000, "00-" + "f" * 32 + "-" + "f" * 16 + "-01" + "-0" * 5_000,
                                         "00-00000000000000000000000000000000-0000000000000000-01", "\u00e9t\u00e9",
                                         "00-zz-zz-zz"])
async def test_a_huge_or_malformed_traceparent_is_ignored(definitions, traceparent):
    """A traceparent header (up to the header limit) or MCP _meta that is huge or malformed is ignored: the call
    answers, its span starts a new trace of its own."""
    gateway = Gateway(Settings(definitions=definitions, reload=False))
    exporter = InMemorySpanExporter()
    tracer = tracing.make(gateway, exporter=exporter)
    assert isinstance(tracer, otel.Tracer)
    gateway.events.subscribe(tracer)
    try:
        with serving(create_app(gateway), lifespan="on") as served:
            headers = {"traceparent": traceparent} if traceparent.isascii() else {}
            async with httpx.AsyncClient() as http:
                response = await http.post(f"{served.url}/tools/echo/call", json={"text": "hi"}, headers=headers)
            assert response.status_code == 200 and response.json()["result"] == "hi", response.text
            async with Client(f"{served.url}/mcp") as client:
                result = await client.call_tool("echo", {"text": "hi"}, meta={"traceparent": traceparent})
            assert not result.is_error, result
        tracer.provider.force_flush()
        spans = [s for s in exporter.get_finished_spans() if s.name == "tools/call echo"]
        assert len(spans) == 2 and all(s.context.trace_id != 0 for s in spans), spans
    finally:
        tracer.close()


def test_metric_labels_never_carry_a_callers_text(definitions):
    """Calls to tool names no catalog has, and users and arguments of any text, add no label value to /metrics."""
    marker = "zq9adversary"
    gateway = Gateway(Settings(definitions=definitions, reload=False))
    with serving(create_app(gateway), lifespan="on") as served:
        for path in (f"/tools/{marker}/call", f"/tools/{marker}%0A{marker}/call"):
            httpx.post(served.url + path, json={}, timeout=10)
        httpx.post(f"{served.url}/tools/echo/call", json={"text": marker}, headers={"x-user": marker}, timeout=10)
        httpx.post(f"{served.url}/tools/echo/call", json={marker: 1}, headers={"x-conversation-id": marker}, timeout=10)
        metrics = httpx.get(f"{served.url}/metrics", timeout=10).text
    assert marker not in metrics
