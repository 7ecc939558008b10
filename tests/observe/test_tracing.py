"""OpenTelemetry traces: the span tree and attributes of calls over REST, MCP and chat (in-memory exporter), the
trace context an upstream service and the LLM receive, an OTLP/HTTP export from a real ``serve`` process, and
when tracing is on."""

from __future__ import annotations

import json
import logging
import sys
import textwrap
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import httpx2
import pytest
import yaml
from fake_llm import FakeLLM, Reply, openai_provider
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from support import serve_process, serving

from gateway import observe
from gateway.events import Event, Observer
from gateway.observe import otel, tracing
from gateway.runtime.gateway import Gateway
from gateway.server import create_app
from gateway.settings import Settings, SettingsInvalid

MODULE = "tracing_test_tools"  # a name of its own: the module is shared by the process's import system
TOOLS_PY = '''
def add(a: float, b: float) -> float:
    return a + b
'''
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
OTEL_VARIABLES = ("OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                  "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_TRACES_SAMPLER",
                  "OTEL_TRACES_SAMPLER_ARG")


@pytest.fixture(autouse=True)
def _no_otel_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests start from an environment that asks for no traces, whatever the machine's says."""
    for name in OTEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def upstream() -> Iterator[SimpleNamespace]:
    """A real HTTP service that answers /echo and keeps the headers of every request it gets."""
    seen: list[dict[str, str]] = []

    async def echo(request: Request) -> Response:
        seen.append(dict(request.headers))
        return JSONResponse({"echo": True})

    with serving(Starlette(routes=[Route("/echo", echo)])) as served:
        yield SimpleNamespace(url=served.url, seen=seen)


@pytest.fixture(scope="module")
def llm() -> Iterator[FakeLLM]:
    """The scripted OpenAI-wire LLM (tests/fake_llm.py), served on 127.0.0.1."""
    fake = FakeLLM()
    with serving(Starlette(routes=[Route("/v1/chat/completions", fake.handle, methods=["POST"])])) as served:
        fake.url = served.url
        yield fake


@pytest.fixture
def definitions(write_definitions, upstream) -> Path:
    tools = [
        {"id": "add", "name": "Add", "user_description": "u", "ai_description": "Adds a and b.",
         "binding": {"python": f"{MODULE}:add"}, "toolsets": ["math"]},
        {"id": "echo", "name": "Echo", "user_description": "u", "ai_description": "Echoes.",
         "binding": {"http": {"method": "GET", "url": f"{upstream.url}/echo"}}},
    ]
    return write_definitions({f"python/{MODULE}.py": textwrap.dedent(TOOLS_PY),
                              "tools.yaml": yaml.safe_dump({"tools": tools}, sort_keys=False)})


@dataclass
class Traced:
    url: str
    gateway: Gateway
    exporter: InMemorySpanExporter
    tracer: otel.Tracer

    def spans(self) -> list[ReadableSpan]:
        self.tracer.provider.force_flush()
        return list(self.exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans() if span.name == name]


@contextmanager
def traced(definitions: Path, **settings: Any) -> Iterator[Traced]:
    """A served gateway whose tracer (the first observer, as ``attach`` orders it) exports to memory; the other
    consumers are attached as the settings ask."""
    gateway = Gateway(Settings(definitions=definitions, reload=False, **settings))
    exporter = InMemorySpanExporter()
    tracer = tracing.make(gateway, exporter=exporter)
    assert isinstance(tracer, otel.Tracer)
    gateway.events.subscribe(tracer)
    try:
        with serving(create_app(gateway), lifespan="on") as server:
            yield Traced(server.url, gateway, exporter, tracer)
    finally:
        tracer.close()


def hex_ids(span: ReadableSpan) -> tuple[str, str]:
    return format(span.context.trace_id, "032x"), format(span.context.span_id, "016x")


def named_in(traceparent: str) -> tuple[str, str]:
    """The trace id and span id a W3C traceparent names (its flags vary: sampled, random)."""
    version, trace_id, span_id, _flags = traceparent.split("-")
    assert version == "00"
    return trace_id, span_id


def parent_id(span: ReadableSpan) -> str | None:
    return format(span.parent.span_id, "016x") if span.parent is not None else None


def test_rest_call_is_a_server_span_under_the_callers_traceparent(definitions):
    """A REST call with a traceparent header is a SERVER span "tools/call add" in the caller's trace, child of the
    caller's span, with the tool, surface, catalog version and call id; an argument error is an error span; a
    malformed traceparent is ignored (a trace of its own), never a failed call."""
    with traced(definitions) as served:
        ok = httpx.post(f"{served.url}/tools/add/call", json={"a": 1, "b": 2}, headers={"traceparent": TRACEPARENT})
        bad = httpx.post(f"{served.url}/tools/add/call", json={"a": "x", "b": 2})
        garbled = httpx.post(f"{served.url}/tools/add/call", json={"a": 1, "b": 1}, headers={"traceparent": "00-zz"})
        assert ok.json()["result"] == 3 and bad.json()["is_error"] is True and garbled.json()["result"] == 2
        first, second, third = served.named("tools/call add")
    assert hex_ids(first)[0] == TRACE_ID and parent_id(first) == PARENT_ID
    assert first.kind is SpanKind.SERVER and first.status.status_code is StatusCode.UNSET
    attributes = first.attributes
    assert attributes["gen_ai.tool.name"] == "add" and attributes["gateway.tool.id"] == "add"
    assert attributes["gen_ai.operation.name"] == "execute_tool"
    assert attributes["gateway.surface"] == "rest"
    assert attributes["gateway.catalog.version"] == served.gateway.catalog.version
    assert len(attributes["gateway.call.id"]) == 16
    assert attributes["gateway.call.outcome"] == "ok" and attributes["gateway.call.result_chars"] == len("3.0")
    assert first.end_time > first.start_time and "gateway.call.side" not in attributes  # side "server" is usual
    # Without a traceparent the call starts a trace of its own.
    assert second.parent is None and hex_ids(second)[0] != TRACE_ID
    assert second.status.status_code is StatusCode.ERROR
    assert second.attributes["error.type"] == "invalid_arguments"
    assert third.parent is None and third.status.status_code is StatusCode.UNSET


async def test_mcp_call_honours_meta_traceparent_before_the_header(definitions):
    """An MCP tools/call from the official client with ``_meta.traceparent`` is a SERVER span in that trace, even
    when a traceparent header names another; without the _meta key the header's trace is used; a traceparent that
    is not a string is an invalid-params error naming it."""
    header_trace = "0af7651916cd43dd8448eb211c80319c"
    headers = {"traceparent": f"00-{header_trace}-b7ad6b7169203331-01"}
    with traced(definitions) as served:
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http, \
                streamable_http_client(f"{served.url}/mcp", http_client=http) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            result = await session.call_tool("add", {"a": 2, "b": 2}, meta={"traceparent": TRACEPARENT})
            assert result.is_error is False
            assert (await session.call_tool("add", {"a": 2, "b": 3})).is_error is False
            with pytest.raises(MCPError, match=r'_meta\["traceparent"\] must be a string'):
                await session.call_tool("add", {"a": 2, "b": 2}, meta={"traceparent": 7})
        from_meta, from_header = served.named("tools/call add")
    assert hex_ids(from_meta)[0] == TRACE_ID and parent_id(from_meta) == PARENT_ID
    assert from_meta.kind is SpanKind.SERVER and from_meta.attributes["gateway.surface"] == "mcp"
    assert hex_ids(from_header)[0] == header_trace


def test_http_tool_sends_the_trace_upstream(definitions, upstream):
    """An HTTP-bound tool's request is a CLIENT span under the call span, and the upstream service receives a
    traceparent in the call's trace that names that span."""
    upstream.seen.clear()
    with traced(definitions) as served:
        assert httpx.post(f"{served.url}/tools/echo/call", json={}).json()["is_error"] is False
        [call] = served.named("tools/call echo")
        [request] = served.named("GET")
    trace_id, call_span = hex_ids(call)
    assert request.kind is SpanKind.CLIENT and parent_id(request) == call_span and hex_ids(request)[0] == trace_id
    assert request.attributes["http.request.method"] == "GET"
    assert request.attributes["http.response.status_code"] == 200
    assert request.attributes["server.address"] == "127.0.0.1"
    [headers] = upstream.seen
    assert named_in(headers["traceparent"]) == hex_ids(request)


def answer(response: httpx.Response, stream: bool) -> str:
    """The assistant's text in a chat completion, or in the chunks of a streamed one."""
    if not stream:
        return response.json()["choices"][0]["message"]["content"]
    chunks = [json.loads(line[6:]) for line in response.text.splitlines()
              if line.startswith("data: {")]
    return "".join(choice["delta"].get("content") or "" for chunk in chunks for choice in chunk["choices"])


def test_a_call_the_sampler_leaves_out_records_nothing_and_still_passes_the_trace_on(definitions, upstream,
                                                                                     monkeypatch):
    """With OTEL_TRACES_SAMPLER=always_off calls answer as usual, no span is exported, and the upstream still
    receives a traceparent (flagged not sampled), so the services after the gateway follow the decision."""
    monkeypatch.setenv("OTEL_TRACES_SAMPLER", "always_off")
    upstream.seen.clear()
    with traced(definitions) as served:
        assert httpx.post(f"{served.url}/tools/add/call", json={"a": 1, "b": 2}).json()["result"] == 3
        assert httpx.post(f"{served.url}/tools/echo/call", json={}).json()["is_error"] is False
        assert served.spans() == []
    [headers] = upstream.seen
    flags = int(headers["traceparent"].rsplit("-", 1)[1], 16)
    assert flags & 1 == 0  # the sampled bit


class Recorder(Observer):
    def __init__(self) -> None:
        self.events: list[Event] = []

    def event(self, event: Event) -> None:
        self.events.append(event)


@pytest.mark.parametrize("stream", [False, True])
def test_chat_turn_is_a_span_over_its_llm_requests_and_tool_calls(definitions, llm, monkeypatch, caplog, stream):
    """A chat request with a traceparent is a SERVER span in the caller's trace; each LLM request is a CLIENT
    "chat {model}" span under it with the GenAI attributes, and sends its own traceparent to the LLM; the tool
    call is an INTERNAL span under it too. Streamed or not, no observer fails and a chat_turn event counts the
    two LLM requests."""
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-test")
    llm.reset()
    llm.answer(Reply(tool_calls=[("call_1", "add", {"a": 1, "b": 2})]), Reply(content="It is 3."))
    recorder = Recorder()
    with caplog.at_level(logging.ERROR, logger="gateway"), \
            traced(definitions, providers={"default": openai_provider(llm)}) as served:
        served.gateway.events.subscribe(recorder)
        response = httpx.post(f"{served.url}/v1/chat/completions", headers={"traceparent": TRACEPARENT}, timeout=30,
                              json={"model": "default", "stream": stream, "gateway": {"toolsets": ["math"]},
                                    "messages": [{"role": "user", "content": "1 + 2?"}]})
        assert response.status_code == 200 and answer(response, stream) == "It is 3."
        [turn] = served.named("invoke_agent tool-gateway")
        asks = served.named("chat fake-gpt")
        [call] = served.named("tools/call add")
    assert hex_ids(turn)[0] == TRACE_ID and parent_id(turn) == PARENT_ID and turn.kind is SpanKind.SERVER
    assert turn.attributes["gen_ai.request.model"] == "fake-gpt"
    assert turn.attributes["gateway.chat.requests"] == 2
    assert [parent_id(ask) for ask in asks] == [hex_ids(turn)[1]] * 2
    assert all(ask.kind is SpanKind.CLIENT for ask in asks)
    first = asks[0].attributes
    assert first["gen_ai.operation.name"] == "chat" and first["gen_ai.provider.name"] == "openai"
    assert first["gen_ai.request.model"] == "fake-gpt" and first["gen_ai.response.model"] == "fake-gpt"
    assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert asks[1].attributes["gen_ai.response.finish_reasons"] == ("stop",)
    if not stream:  # the fake LLM streams usage only when asked to
        assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (10, 5)
    assert call.kind is SpanKind.INTERNAL and parent_id(call) == hex_ids(turn)[1]
    assert call.attributes["gateway.surface"] == "chat"
    assert [named_in(request.headers["traceparent"]) for request in llm.requests] == [hex_ids(ask) for ask in asks]
    assert [(e.data["rounds"], e.data["outcome"]) for e in recorder.events if e.kind == "chat_turn"] == [(2, "ok")]
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR], caplog.text


@pytest.fixture
def receiver() -> Iterator[SimpleNamespace]:
    """An OTLP/HTTP trace receiver on 127.0.0.1: decodes each POST /v1/traces (protobuf) and keeps it."""
    received: list[ExportTraceServiceRequest] = []
    lock = threading.Lock()

    async def traces(request: Request) -> Response:
        assert request.headers["content-type"] == "application/x-protobuf"
        export = ExportTraceServiceRequest()
        export.ParseFromString(await request.body())
        with lock:
            received.append(export)
        return Response(b"", media_type="application/x-protobuf")

    with serving(Starlette(routes=[Route("/v1/traces", traces, methods=["POST"])])) as served:
        yield SimpleNamespace(url=served.url, received=received)


def _value(any_value: Any) -> Any:
    return getattr(any_value, any_value.WhichOneof("value"))


def test_serve_exports_spans_over_otlp_http(definitions, receiver):
    """``serve`` with OTEL_EXPORTER_OTLP_ENDPOINT set (tracing: auto) exports its call spans over OTLP/HTTP to that
    endpoint, with the service name from OTEL_SERVICE_NAME and the call's attributes, by the time it stops."""

    def call(url: str) -> None:
        response = httpx.post(f"{url}/tools/add/call", json={"a": 20, "b": 22}, headers={"traceparent": TRACEPARENT})
        assert response.json()["result"] == 42

    serve_process(definitions, env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url, "OTEL_SERVICE_NAME": "gw-under-test"},
                  while_running=call)
    spans = [(resource.resource, span) for export in receiver.received for resource in export.resource_spans
             for scope in resource.scope_spans for span in scope.spans]
    [(resource, span)] = [(r, s) for r, s in spans if s.name == "tools/call add"]
    assert {a.key: _value(a.value) for a in resource.attributes}["service.name"] == "gw-under-test"
    attributes = {a.key: _value(a.value) for a in span.attributes}
    assert attributes["gen_ai.tool.name"] == "add" and attributes["gateway.surface"] == "rest"
    assert attributes["gateway.call.outcome"] == "ok"
    assert span.trace_id.hex() == TRACE_ID and span.parent_span_id.hex() == PARENT_ID


def _gateway(mode: str) -> Any:
    return SimpleNamespace(settings=Settings(definitions=Path("."), tracing=mode))


@pytest.mark.parametrize(("mode", "environ", "on"), [
    ("auto", {}, False),
    ("auto", {"OTEL_TRACES_EXPORTER": "console"}, True),
    ("auto", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True),
    ("auto", {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, True),
    ("auto", {"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, False),
    ("on", {}, True),
    ("on", {"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "console"}, False),
    ("off", {"OTEL_TRACES_EXPORTER": "console"}, False),
])
def test_when_tracing_is_on(mode, environ, on, monkeypatch):
    """``auto`` traces when a variable asks for an exporter, ``on`` always, ``off`` never, and OTEL_SDK_DISABLED
    turns it off whatever the setting."""
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    tracer = tracing.make(_gateway(mode))
    try:
        assert (tracer is not None) is on
    finally:
        if tracer is not None:
            tracer.close()


def test_on_without_the_sdk_refuses_to_start(monkeypatch):
    """``tracing: on`` without the [otel] extra is a settings error that says how to install it; ``auto`` then
    traces nothing."""
    # What a missing SDK looks like: the module that needs it does not import.
    monkeypatch.setitem(sys.modules, "gateway.observe.otel", None)
    monkeypatch.delattr(observe, "otel")
    with pytest.raises(SettingsInvalid, match=r"pip install 'tool-gateway\[otel\]'"):
        tracing.make(_gateway("on"))
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    assert tracing.make(_gateway("auto")) is None


def test_provider_takes_the_standard_variables(monkeypatch):
    """The service is "tool-gateway" unless OTEL_SERVICE_NAME says otherwise, "otlp" is the OTLP/HTTP exporter,
    and an exporter nobody installed is a settings error naming it."""
    assert otel.make_provider([]).resource.attributes["service.name"] == "tool-gateway"
    monkeypatch.setenv("OTEL_SERVICE_NAME", "billing-gateway")
    assert otel.make_provider([]).resource.attributes["service.name"] == "billing-gateway"
    [exporter] = otel.exporters_from_env({"OTEL_TRACES_EXPORTER": "otlp"})
    assert type(exporter).__module__.startswith("opentelemetry.exporter.otlp.proto.http")
    exporter.shutdown()
    with pytest.raises(SettingsInvalid, match="no trace exporter 'zipkin' is installed"):
        otel.exporters_from_env({"OTEL_TRACES_EXPORTER": "zipkin"})
