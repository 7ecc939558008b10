"""One stream of events: what the gateway did, told once, to every consumer that wants to know.

Producers (``invoke`` for calls, the HTTP binding for upstream requests, the chat loop for LLM requests and
turns, the runtime for reloads, the server for admin actions, auth failures and bridge sessions) describe what
happened here and nowhere else; consumers — metrics (``gateway.observe.metrics``), the audit trail, traces, the
log line per call, SLOs and the console's live view — subscribe an ``Observer`` to the ``EventBus`` and never
call back into the producers. No surface computes its own figures.

Two shapes:

- an ``Activity`` has a beginning and an end (a tool call, an upstream HTTP request, an LLM request). The bus
  tells every observer ``begin(activity)`` then ``end(activity)`` in the same task, so a tracer can open a span at
  the beginning, make it current for what runs inside (a child span per upstream request) and close it at the
  end; ``activity.headers`` is where an observer puts headers the producer sends on (``traceparent``).
- an ``Event`` happened at one instant (a reload, an admin action, an auth failure, a bridge session opened).

Observers run inline on the producer's thread and must be cheap and must not raise; the bus logs and drops an
observer's exception rather than let it fail a call. Slow work (writing the audit file) is an observer's own
business: it queues, it does not block.
"""

from __future__ import annotations

import contextvars
import json
import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from random import getrandbits
from typing import Any

import orjson

log = logging.getLogger("gateway.events")


@dataclass(eq=False, slots=True)
class Activity:
    """Something with a beginning and an end. ``kind`` names its shape:

    - ``"call"``: a tool call (``CallActivity``);
    - ``"upstream"``: an HTTP request a binding sends (``attributes``: tool, method, scheme, host, port — never the
      path or query, where secrets live; at the end status);
    - ``"llm"``: a request to an LLM provider (``attributes``: provider, provider_kind, model, operation, host,
      port, traceparent (the chat span's context); at the end input_tokens, output_tokens, finish_reason,
      response_model);
    - ``"chat"``: one chat request through the gateway's loop, around its ``llm`` activities and tool calls
      (``attributes``: provider, provider_kind, model, surface, caller, conversation_id, traceparent (the
      caller's); at the end requests, input_tokens, output_tokens, finish_reason, response_model). Chat and LLM
      activities may end in another task than they began (a streamed answer), so tracers must not make them
      current: they pass their context on through ``traceparent`` instead.
    """

    kind: str
    attributes: dict[str, Any] = field(default_factory=dict)
    at: float = field(default_factory=time.time)  # wall clock, for records people read
    started: float = field(default_factory=time.perf_counter)  # monotonic, for the duration
    outcome: str = ""  # set at the end: "ok", or what went wrong (see each producer)
    duration_s: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)  # what observers ask the producer to send on
    parent: CallActivity | None = None  # the call an upstream or LLM request serves, when there is one
    trace_id: str | None = None  # set in begin by the tracer, when tracing is on (32 hex digits)
    # Per-observer state (a span and its context token), keyed by the observer: the activity carries it from
    # begin to end so observers need no table of their own.
    state: dict[int, Any] = field(default_factory=dict)


# Outcomes of a call, from best to worst (metrics, the audit trail and SLOs use these words):
#   ok                 the tool answered
#   error              the tool (or a filter) answered with an error result, or raised ToolError
#   invalid_arguments  the arguments did not parse or did not match the input schema
#   timeout            the tool did not finish within its timeout
#   rejected           refused before it ran (a rate limit)
#   failed             the tool's (or a filter's) own bug: an unexpected exception, logged with the call id
#   cancelled          the caller went away before it ended
CALL_OUTCOMES = ("ok", "error", "invalid_arguments", "timeout", "rejected", "failed", "cancelled", "approval_pending",
                 "approval_denied")


@dataclass(eq=False, slots=True)
class CallActivity(Activity):
    """One tool call through ``invoke``. ``id`` is the call id every log line of the call and an internal error's
    reference name; ``arguments`` are the parsed arguments (or the raw value when they did not parse)."""

    id: str = ""
    tool: str = ""
    surface: str = ""
    caller: str | None = None  # the API key's name (None with auth off)
    user: str | None = None
    client_id: str | None = None  # an OAuth caller's client and issuer (None for API keys)
    issuer: str | None = None
    version: str = ""  # the catalog version the call ran on
    side: str = "server"
    arguments: Any = None
    audit_arguments: bool = True  # the tool's ``audit: {arguments: false}`` turns it off
    traceparent: str | None = None  # an incoming W3C trace context (REST/chat header, MCP ``_meta``)
    conversation_id: str | None = None
    # At the end:
    result_chars: int = 0
    truncated: bool = False
    error: str | None = None
    result: Any = None  # the ToolResult, for consumers that show it (the console); never logged by default

    def argument_bytes(self) -> int:
        """The size of the arguments as compact UTF-8 JSON: computed when a consumer asks (a tracer), not per call.
        orjson measures them (~5x faster; a float json would write with an exponent, ``1e+16``, is a byte or two
        shorter); json measures what orjson refuses (a lone surrogate, an integer past 64 bits)."""
        if isinstance(self.arguments, (str, bytes)):
            return len(self.arguments)
        try:
            return len(orjson.dumps(self.arguments))
        except TypeError:  # orjson.JSONEncodeError is one
            pass
        try:
            return len(json.dumps(self.arguments, separators=(",", ":"), ensure_ascii=False).encode())
        except (TypeError, ValueError, RecursionError):  # arguments that did not parse into JSON data
            return 0


@dataclass(frozen=True, slots=True)
class Event:
    """Something that happened at one instant. ``kind`` names it:

    - ``"reload"``: ok, changed, version, tools, duration_s, timed_out, problems (their texts), added, removed,
      modified (tool ids)
    - ``"admin"``: action ("reload", "edit", ...), caller, detail (a mapping; never a secret)
    - ``"auth_failure"``: surface, reason ("missing", "invalid", "forbidden")
    - ``"bridge_session"``: change ("opened", "closed"), sessions (how many are open now)
    - ``"chat_turn"``: rounds (LLM requests in the turn), outcome, provider
    - ``"slo"``: tool, state ("breached", "recovered"), p95_ms, error_rate
    - ``"approval"``: action ("requested", "approved", "denied", "used"), caller, detail (id, tool, by, via,
      call_sha256)
    """

    kind: str
    data: Mapping[str, Any]
    at: float = field(default_factory=time.time)


class Observer:
    """A consumer of the stream. Override what you need; every method must be cheap and must not block."""

    def begin(self, activity: Activity) -> None:
        """An activity starts (on the task that runs it)."""

    def end(self, activity: Activity) -> None:
        """An activity ends: ``outcome`` and ``duration_s`` are set."""

    def event(self, event: Event) -> None:
        """Something happened."""

    def close(self) -> None:
        """The gateway stops: release what the observer holds (a file, a thread, an exporter)."""


class EventBus:
    """The observers of one gateway. Producers hold the bus; an empty bus costs a truth test per activity.

    Each of ``begin``, ``end`` and ``emit`` tells only the observers that override that method (most observe
    only ``end``, or only events): the lists are made when an observer subscribes, not per call."""

    def __init__(self) -> None:
        self.observers: tuple[Observer, ...] = ()
        self._begins: tuple[Observer, ...] = ()
        self._ends: tuple[Observer, ...] = ()  # the first to begin is the last to end, like nested spans
        self._events: tuple[Observer, ...] = ()

    def subscribe(self, observer: Observer) -> None:
        self._observe((*self.observers, observer))

    def unsubscribe(self, observer: Observer) -> None:
        self._observe(tuple(o for o in self.observers if o is not observer))

    def _observe(self, observers: tuple[Observer, ...]) -> None:
        def overriding(method: str) -> tuple[Observer, ...]:
            return tuple(o for o in observers if getattr(type(o), method) is not getattr(Observer, method))

        self._begins, self._ends, self._events = overriding("begin"), overriding("end")[::-1], overriding("event")
        self.observers = observers

    def begin(self, activity: Activity) -> None:
        for observer in self._begins:
            try:
                observer.begin(activity)
            except Exception:  # an observer's bug must never fail the call it observes
                log.exception("event observer %s failed on begin(%s)", type(observer).__name__, activity.kind)

    def end(self, activity: Activity, outcome: str) -> None:
        activity.outcome = outcome
        activity.duration_s = time.perf_counter() - activity.started
        for observer in self._ends:
            try:
                observer.end(activity)
            except Exception:  # as in begin
                log.exception("event observer %s failed on end(%s)", type(observer).__name__, activity.kind)

    def emit(self, kind: str, **data: Any) -> None:
        if not self._events:
            return
        event = Event(kind, data)
        for observer in self._events:
            try:
                observer.event(event)
            except Exception:  # as in begin
                log.exception("event observer %s failed on event %s", type(observer).__name__, kind)

    @contextmanager
    def activity(self, activity: Activity, failed: str = "failed") -> Iterator[Activity]:
        """``begin`` … ``end`` around a block; the block sets ``activity.outcome`` (else "ok"), an exception
        ends it as ``failed`` (or the block's outcome, when it set one before raising)."""
        if not self.observers:
            yield activity
            return
        self.begin(activity)
        try:
            yield activity
        except BaseException:
            self.end(activity, activity.outcome or failed)
            raise
        self.end(activity, activity.outcome or "ok")


# The call running in this task (and in the threads it hands work to with its context): log lines name its id,
# and an upstream or LLM request records it as its parent.
current_call: contextvars.ContextVar[CallActivity | None] = contextvars.ContextVar("gateway_call", default=None)

NULL_BUS = EventBus()  # for catalogs built without a running gateway (the CLI's validate, tests); never subscribed


def new_call_id() -> str:
    """16 hex digits. A name for a call, not a secret: ``random``'s generator (seeded from the system's, re-seeded
    in a forked child) rather than ``uuid4``, whose ``os.urandom`` let go of the GIL on every call — with tool
    threads waiting for it, each call then queued behind them (~8 us, and a thread switch)."""
    return f"{getrandbits(64):016x}"
