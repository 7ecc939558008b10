"""The OpenTelemetry side of tracing: a ``TracerProvider`` configured from the ``OTEL_*`` variables, and the
``Tracer`` observer that turns activities of the event stream into spans (``gateway.observe.tracing`` decides
whether to make one). Imported only when tracing is on: it needs the ``[otel]`` extra.

    activity   span                       kind                              parent
    call       tools/call {tool}          SERVER (rest, mcp), INTERNAL     the current span, else the call's
                                          (chat and the CLI)                incoming traceparent
    chat       invoke_agent tool-gateway  SERVER                            the chat request's traceparent
    llm        chat {model}               CLIENT                            the chat span
    upstream   {METHOD}                   CLIENT                            the call span

Only a call's span is made current (attached in ``begin``, detached in ``end``, both in ``invoke``'s task), so
that what runs inside the tool sees it. A chat turn and an LLM request may begin in one task and end in another
(a streamed answer is sent by a task of its own), where a context token cannot be detached: their spans are
never attached. Their children name them instead: the tracer writes each span's ``traceparent`` into
``activity.headers``, the LLM request sends it on, and the chat loop hands the turn's to the LLM requests and tool
calls it starts (``attributes["traceparent"]``, ``CallContext.traceparent``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Mapping
from importlib.metadata import entry_points
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from ..events import Activity, CallActivity, Observer
from ..settings import SettingsInvalid

log = logging.getLogger("gateway.observe.tracing")
DEFAULT_SERVICE_NAME = "tool-gateway"
EXPORTER_GROUP = "opentelemetry_traces_exporter"  # the SDK's registry of exporters, by the names OTEL_ uses
# "otlp" means OTLP over the protocol the variables name; the extra installs the HTTP one, the default here.
OTLP_BY_PROTOCOL = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}
SERVER_SURFACES = frozenset({"rest", "mcp"})  # calls that arrive from outside the process
PROPAGATOR = TraceContextTextMapPropagator()  # W3C trace context: the one format the gateway reads and sends


def make_provider(exporters: Iterable[SpanExporter] | None = None) -> TracerProvider:
    """A provider of the gateway's own (never the global one) from the standard variables: the resource
    (``OTEL_SERVICE_NAME``, else ``tool-gateway``; ``OTEL_RESOURCE_ATTRIBUTES``), the sampler
    (``OTEL_TRACES_SAMPLER``), batching (``OTEL_BSP_*``) and, unless ``exporters`` are given, the exporters
    ``OTEL_TRACES_EXPORTER`` names (each configured by its own ``OTEL_EXPORTER_*`` variables)."""
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):  # the SDK's "none given"
        resource = resource.merge(Resource({SERVICE_NAME: DEFAULT_SERVICE_NAME}))
    provider = TracerProvider(resource=resource)
    for exporter in exporters if exporters is not None else exporters_from_env(os.environ):
        provider.add_span_processor(BatchSpanProcessor(exporter))
    return provider


def exporters_from_env(environ: Mapping[str, str]) -> list[SpanExporter]:
    """The exporters ``OTEL_TRACES_EXPORTER`` names (comma-separated; default ``otlp``; ``none`` for none), found
    in the SDK's entry points like the SDK's own auto-configuration finds them."""
    names = [name.strip() for name in environ.get("OTEL_TRACES_EXPORTER", "otlp").split(",") if name.strip()]
    if names == ["none"]:
        return []
    exporters = []
    for name in names:
        found = _entry_point(_otlp(name, environ) if name == "otlp" else name)
        try:
            exporter = found.load()()
        except Exception as exc:  # a broken plug-in or a variable it refuses: the setting is wrong, say which
            raise SettingsInvalid(f"OTEL_TRACES_EXPORTER: the exporter '{name}' failed to start: {exc}") from exc
        exporters.append(exporter)
    return exporters


def _otlp(name: str, environ: Mapping[str, str]) -> str:
    protocol = (environ.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
                or "http/protobuf").strip()
    if protocol not in OTLP_BY_PROTOCOL:
        raise SettingsInvalid(f"OTEL_EXPORTER_OTLP_PROTOCOL: unknown OTLP protocol '{protocol}' (known: "
                              f"{', '.join(OTLP_BY_PROTOCOL)}).")
    return OTLP_BY_PROTOCOL[protocol]


def _entry_point(name: str) -> Any:
    found = entry_points(group=EXPORTER_GROUP, name=name)
    if not found:
        known = sorted({point.name for point in entry_points(group=EXPORTER_GROUP)} | {"otlp", "none"})
        raise SettingsInvalid(f"OTEL_TRACES_EXPORTER: no trace exporter '{name}' is installed (installed: "
                              f"{', '.join(known)}).")
    return next(iter(found))


class Tracer(Observer):
    """A span per activity of the kinds it knows (others pass by), exported by its own provider."""

    def __init__(self, provider: TracerProvider):
        self.provider = provider
        self.tracer = provider.get_tracer("gateway")
        self.key = id(self)  # where this observer keeps (span, context token, end) in ``activity.state``

    def begin(self, activity: Activity) -> None:
        shape = KINDS.get(activity.kind)
        if shape is None:
            return
        start, end = shape
        name, kind, attributes = start(activity)
        span = self.tracer.start_span(name, self._parent(activity), kind,
                                      {k: v for k, v in attributes.items() if v is not None})
        activity.trace_id = format(span.get_span_context().trace_id, "032x")
        token = None
        if isinstance(activity, CallActivity):
            token = otel_context.attach(trace.set_span_in_context(span))
        else:  # what the producer sends on, or hands to the activities it starts
            PROPAGATOR.inject(activity.headers, trace.set_span_in_context(span))
        activity.state[self.key] = (span, token, end)

    def end(self, activity: Activity) -> None:
        begun = activity.state.pop(self.key, None)
        if begun is None:
            return
        span, token, end = begun
        if span.is_recording():  # a span the sampler left out records nothing: skip gathering what it would
            end(span, activity)
        span.end()
        if token is not None:
            otel_context.detach(token)

    def close(self) -> None:
        self.provider.shutdown()  # exports what is still queued, then stops the batching threads

    def _parent(self, activity: Activity) -> Context | None:
        """The parent: the span of the activity's parent call, else the current span (None: the current
        context), else the W3C trace context the producer was given; with none of them, a new trace."""
        if activity.parent is not None:
            begun = activity.parent.state.get(self.key)
            if begun is not None:
                return trace.set_span_in_context(begun[0])
        if trace.get_current_span().get_span_context().is_valid:
            return None
        traceparent = activity.traceparent if isinstance(activity, CallActivity) else \
            activity.attributes.get("traceparent")
        if traceparent:
            return PROPAGATOR.extract({"traceparent": traceparent})  # a malformed one is ignored: a new trace
        return None


Start = Callable[[Any], tuple[str, SpanKind, dict[str, Any]]]
End = Callable[[Span, Any], None]


# The SDK checks every attribute as it is set (~1 µs each): a call's span carries what tells calls apart, and
# leaves out what is usual (side "server", not truncated) and what the span holds anyway (its duration).
def _start_call(call: CallActivity) -> tuple[str, SpanKind, dict[str, Any]]:
    return f"tools/call {call.tool}", SpanKind.SERVER if call.surface in SERVER_SURFACES else SpanKind.INTERNAL, {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": call.tool,
        "gateway.tool.id": call.tool,
        "gateway.surface": call.surface,
        "gateway.caller": call.caller,
        "gateway.catalog.version": call.version,
        "gateway.call.id": call.id,
        "gateway.call.side": call.side if call.side != "server" else None,
        "gen_ai.conversation.id": call.conversation_id,
    }


def _end_call(span: Span, call: CallActivity) -> None:
    ended = {"gateway.call.outcome": call.outcome, "gateway.call.argument_bytes": call.argument_bytes(),
             "gateway.call.result_chars": call.result_chars}
    if call.truncated:
        ended["gateway.call.truncated"] = True
    span.set_attributes(ended)
    _failed(span, call.outcome)


def _start_chat(turn: Activity) -> tuple[str, SpanKind, dict[str, Any]]:
    given = turn.attributes
    return f"invoke_agent {DEFAULT_SERVICE_NAME}", SpanKind.SERVER, {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": DEFAULT_SERVICE_NAME,
        "gen_ai.provider.name": given.get("provider_kind"),
        "gen_ai.request.model": given.get("model"),
        "gen_ai.conversation.id": given.get("conversation_id"),
        "gateway.llm.provider": given.get("provider"),
        "gateway.surface": given.get("surface"),
        "gateway.caller": given.get("caller"),
    }


def _end_chat(span: Span, turn: Activity) -> None:
    _end_generation(span, turn)
    span.set_attribute("gateway.chat.requests", turn.attributes.get("requests", 0))


def _start_llm(request: Activity) -> tuple[str, SpanKind, dict[str, Any]]:
    given = request.attributes
    return f"{given.get('operation', 'chat')} {given.get('model')}", SpanKind.CLIENT, {
        "gen_ai.operation.name": given.get("operation", "chat"),
        "gen_ai.provider.name": given.get("provider_kind"),
        "gen_ai.system": given.get("provider_kind"),  # the older name, still the one many backends read
        "gen_ai.request.model": given.get("model"),
        "gateway.llm.provider": given.get("provider"),
        "server.address": given.get("host"),
        "server.port": given.get("port"),
    }


def _end_generation(span: Span, activity: Activity) -> None:
    given = activity.attributes
    reason = given.get("finish_reason")
    span.set_attributes({key: value for key, value in {
        "gen_ai.response.model": given.get("response_model"),
        "gen_ai.usage.input_tokens": given.get("input_tokens"),
        "gen_ai.usage.output_tokens": given.get("output_tokens"),
        "gen_ai.response.finish_reasons": (reason,) if reason else None,
    }.items() if value is not None})
    _failed(span, activity.outcome)


def _start_upstream(request: Activity) -> tuple[str, SpanKind, dict[str, Any]]:
    given = request.attributes
    method = given.get("method", "GET")
    # The HTTP conventions name a client span by its method alone when no URL template is known. The producer
    # never gives the path or query (they may hold a secret).
    return method, SpanKind.CLIENT, {
        "http.request.method": method,
        "server.address": given.get("host"),
        "server.port": given.get("port"),
        "gateway.tool.id": given.get("tool"),
    }


def _end_upstream(span: Span, request: Activity) -> None:
    status = request.attributes.get("status")
    if isinstance(status, int):
        span.set_attribute("http.response.status_code", status)
        if status >= 400:  # a client span's 4xx is an error too (HTTP conventions)
            span.set_attribute("error.type", str(status))
            span.set_status(Status(StatusCode.ERROR))
            return
    _failed(span, request.outcome)


def _failed(span: Span, outcome: str) -> None:
    if outcome != "ok":
        span.set_attribute("error.type", outcome)
        span.set_status(Status(StatusCode.ERROR, outcome))


# The kinds of activity with a span: how it starts (name, kind, attributes) and what its end adds.
KINDS: dict[str, tuple[Start, End]] = {"call": (_start_call, _end_call), "chat": (_start_chat, _end_chat),
                                       "llm": (_start_llm, _end_generation),
                                       "upstream": (_start_upstream, _end_upstream)}
