"""The tool loop: ask the model, run the tools it calls, send back the results, until it answers in text.

One ``Turn`` per request, on the catalog snapshot the request started with::

    accept the caller's results for calls handed to it (normalised like server results)
    while the model calls tools and fewer than chat.max_round_trips rounds have run in this turn:
        answer each call, in call order (gateway.loop.calls):
          unknown name / call limit reached / arguments not JSON   → an error result the model can read
          a client tool (scope client, or all with gateway.side client), a caller's own function → hand back
          a server tool                                            → gateway.invoke, concurrently (bounded)
        if anything is handed back: stop; the caller runs it and returns with the results
        if every call was a return_direct tool that succeeded: its result is the answer
    at the cap: one last call with tools forbidden, so the user still gets an answer

A "turn" starts at the latest user message, so the round cap and per-tool ``max_calls`` hold across the
requests of a turn that hands tools back and forth. A forced ``tool_choice`` (``required`` or one function)
applies to the first round only; kept for every round it would loop until the cap.

The loop yields events, so the same code serves a JSON response and an SSE stream: ``TextDelta`` as the
model writes, ``Executed`` after each round of tool calls, ``Finished`` last.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from ..catalog.snapshot import Catalog
from ..context import CallContext
from ..errors import GatewayError
from ..events import Activity, current_call
from ..search import Searches
from ..search.bounds import inline
from .calls import Answer, HandBack, accept_results, approved, execute, plan, tool_message, unique_ids
from .config import LoopConfig
from .handoff import Handoffs, last_user_index
from .messages import ModelReply, ModelRequest, ProviderTimeout, Sleep, ToolCall
from .models import ModelNames
from .offer import MayUse, Offer, choose_tools
from .request import ChatRequest
from .selection import Selection
from .trace import ToolExecution

if TYPE_CHECKING:
    from .providers import HttpProvider

PARAGRAPH = "\n\n"  # between the texts of successive rounds
# Offer rules that would read more characters than this in all (the latest user message's, once per rule) are
# matched in a worker thread (see ChatLoop.turn).
INLINE_OFFER_CHARS = 2_000


class ChatUnavailable(GatewayError):
    status = 503
    code = "provider_not_configured"


@dataclass(frozen=True)
class TextDelta:
    text: str


@dataclass(frozen=True)
class Executed:
    executions: tuple[ToolExecution, ...]


@dataclass(frozen=True)
class Finished:
    content: str
    tool_calls: tuple[ToolCall, ...]  # calls handed back to the caller
    finish_reason: str
    model: str
    usage: Mapping[str, int] | None
    trace: tuple[ToolExecution, ...]
    # Where tools were selected (gateway.loop.selection): the gateway tools offered, and why; else None.
    offered: tuple[Mapping[str, str], ...] | None = None


Event = TextDelta | Executed | Finished


class ChatLoop:
    """The configured providers and the loop that runs chat turns with them."""

    def __init__(self, config: LoopConfig, http_client: Callable[[], httpx.AsyncClient], *,
                 sleep: Sleep = asyncio.sleep, handoffs: Handoffs | None = None, searches: Searches | None = None):
        self.config = config
        # The gateway's (so a reload's index is made from the last one, before the next turn asks), or its own.
        self.searches = searches or Searches(config.chat.dense_search)
        self.providers: dict[str, HttpProvider] = {}
        if config.providers:
            # The clients are imported only where a provider is configured: a gateway without one serves no chat.
            from .providers import make_provider

            self.providers = {name: make_provider(c, http_client, sleep=sleep) for name, c in config.providers.items()}
        self.models = ModelNames(config.providers, config.default_provider)
        self.handoffs = handoffs or Handoffs()

    def provider_for(self, model: str | None) -> tuple[HttpProvider, str]:
        """The provider and model a request's ``model`` names (see ``gateway.loop.models``)."""
        if not self.providers:
            raise ChatUnavailable("No LLM provider is configured: add 'providers' (and 'chat') to the settings.")
        choice = self.models.resolve(model)
        return self.providers[choice.provider], choice.model

    async def turn(self, catalog: Catalog, request: ChatRequest, caller: MayUse | None = None,
                   who: Mapping[str, Any] | None = None) -> Turn:
        """Prepare one request of a turn: everything that can be refused (``InvalidRequest``, ``UnknownModel``)
        is refused here. ``who``: the ``CallContext`` fields naming the caller (``caller``: the principal; an OAuth
        caller's ``client_id``, ``issuer``, ``subject_token``), given to every tool call of the turn."""
        rules = sum(1 for tool in catalog.tools.values() if tool.definition.offer)
        selection = request.tool_selection if request.tool_selection is not None else self.config.chat.tool_selection
        searching = isinstance(selection, Selection)
        if searching:  # the catalog's index, made in a worker thread the first time (from the last catalog's)
            await self.searches.index(catalog)
        if len(request.latest_user_text) * max(rules, 1) > INLINE_OFFER_CHARS or (
                searching and not inline(len(catalog.tools), request.conversation_text)):
            # Offer rules are matched in linear time, but a long message times many rules still adds up (RE2 at
            # its slowest allowed pattern: ~100 ms per rule over 20,000 characters, ~7 ms over 2,000); RE2
            # releases the GIL, so a worker thread keeps the event loop free.
            turn = await asyncio.to_thread(Turn, self, catalog, request, caller, who or {})
        else:
            turn = Turn(self, catalog, request, caller, who or {})
        await turn.accept()
        return turn

    async def complete(self, catalog: Catalog, request: ChatRequest, caller: MayUse | None = None,
                       who: Mapping[str, Any] | None = None) -> Finished:
        """Run one request and return only its outcome."""
        finished = None
        async for event in (await self.turn(catalog, request, caller, who)).run():
            if isinstance(event, Finished):
                finished = event
        assert finished is not None
        return finished


class Turn:
    def __init__(self, loop: ChatLoop, catalog: Catalog, request: ChatRequest, caller: MayUse | None,
                 who: Mapping[str, Any]):
        self.loop = loop
        self.catalog = catalog
        self.request = request
        self.provider, self.model = loop.provider_for(request.model)
        self.offer: Offer = choose_tools(catalog, request, loop.config.chat, self.provider.tool_format,
                                         self.provider.declare_caller_tool, caller)
        self.who = who
        self.principal = (who.get("caller"), request.user, request.conversation_id)
        self.trace: list[ToolExecution] = []
        self.texts: list[str] = []
        self.usage: Counter[str] = Counter()
        self.requests = 0  # LLM requests sent in this request
        config = self.provider.config
        # This request on the event stream; the tracer hands its span's traceparent to what it starts (headers).
        self.activity = Activity("chat", {
            "provider": config.name, "provider_kind": config.kind, "model": self.model, "surface": "chat",
            "caller": who.get("caller"), "conversation_id": request.conversation_id, "traceparent": request.traceparent})

    async def accept(self) -> None:
        """Expand handed-back messages and take the caller's results (they pass through their tools' filters,
        which may await). Here, not in ``__init__``: that may run in a worker thread, and the handoffs are read
        through the event loop's shared-state client."""
        self.messages = await self.loop.handoffs.expand(self.principal, self.request.messages)
        start = last_user_index(self.messages) + 1
        earlier = [m for m in self.messages[start:] if m.get("role") == "assistant" and m.get("tool_calls")]
        self.rounds = len(earlier)
        self.calls = Counter(c["function"]["name"] for m in earlier for c in m["tool_calls"])
        self.received = await accept_results(self.catalog, self.messages, self.request.messages, self.rounds,
                                             self.context)
        self.trace += self.received
        self.base = len(self.messages)  # from here on, messages are the gateway's own

    async def run(self) -> AsyncIterator[Event]:
        """The events of this request; the last is ``Finished``. The request is told to the catalog's event stream
        as a ``chat`` activity, around its LLM requests (``llm`` activities) and tool calls, then as a
        ``chat_turn`` event counting its LLM requests."""
        events = self.catalog.events
        events.begin(self.activity)
        outcome = "cancelled"  # a caller gone away closes this generator where it waits, with GeneratorExit
        try:
            async with aclosing(self.rounds_run()) as rounds:
                async for event in rounds:
                    yield event
            outcome = "ok"
        except Exception as exc:
            outcome = failure_outcome(exc)
            raise
        finally:
            self.activity.attributes.update(requests=self.requests, **_tokens(self.usage))
            events.end(self.activity, outcome)
            events.emit("chat_turn", rounds=self.requests, outcome=outcome, provider=self.provider.name)

    async def rounds_run(self) -> AsyncIterator[Event]:
        if self.received:
            yield Executed(tuple(self.received))
        choice = self.request.tool_choice
        if self.rounds and (choice == "required" or isinstance(choice, Mapping)):
            choice = None  # forced for the turn's first round only, even when the caller sends it again
        while True:
            final = self.rounds >= self.loop.config.chat.max_round_trips
            reply = None
            async with aclosing(self.ask(final, choice)) as asking:  # closed with the turn: its request ends too
                async for event in asking:
                    if isinstance(event, ModelReply):
                        reply = event
                    else:
                        yield event
            assert reply is not None
            reply = unique_ids(reply)
            if not reply.tool_calls or final:
                yield self.answer(reply)
                return
            self.rounds += 1
            if choice == "required" or isinstance(choice, Mapping):
                choice = None  # forced for the first round only
            self.messages.append(reply.message())
            plans = await approved(self.catalog, [plan(call, self.offer, self.calls, self.provider.tool_format)
                                                  for call in reply.tool_calls], self.offer, self.context)
            answered = [p for p in plans if isinstance(p, Answer)]
            results = await execute(self.catalog, answered, self.loop.config.chat.max_parallel_tools, self.context)
            if answered:
                executions = tuple(ToolExecution.of(p.call.id, p.arguments, result, self.rounds)
                                   for p, result in zip(answered, results))
                self.trace += executions
                yield Executed(executions)
            messages = [tool_message(p.call.id, result) for p, result in zip(answered, results)]
            handed = tuple(p.call for p in plans if isinstance(p, HandBack))
            if handed:
                yield await self.hand_back(handed, messages, reply.model)
                return
            self.messages += messages
            if all(p.offered and p.offered.tool.definition.return_direct for p in answered) \
                    and len(answered) == len(plans) and not any(r.is_error for r in results):
                direct = [r.text for r in results]
                if self.request.stream:
                    yield TextDelta((PARAGRAPH if self.texts else "") + PARAGRAPH.join(direct))
                self.texts += direct
                yield self.finished(PARAGRAPH.join(self.texts), (), "stop", reply.model)
                return

    def answer(self, reply: ModelReply) -> Finished:
        """The end of the turn in text; calls in a reply to the final, tool-less request are not run."""
        content = PARAGRAPH.join(self.texts)
        if not content and reply.tool_calls:
            content = (f"(No answer: the model was still calling tools after {self.rounds} round(s), the gateway's "
                       "limit.)")
        return self.finished(content, (), "stop" if reply.tool_calls else reply.finish_reason, reply.model)

    async def ask(self, final: bool, choice: Any) -> AsyncIterator[TextDelta | ModelReply]:
        """One call to the model; text deltas first when streaming, the reply last."""
        # A tool at its call limit is no longer declared, except where the provider needs every tool of the
        # history declared; a call to it is refused either way.
        exhausted = set() if self.provider.keeps_tools_for_history else {
            name for name, o in self.offer.tools.items()
            if o.tool.definition.max_calls is not None and self.calls[name] >= o.tool.definition.max_calls}
        tools = self.offer.declarations(exhausted)
        if final:
            # Tools stay declared only where the provider needs them to read the history; their use is forbidden.
            tools, choice = (self.offer.declarations(), "none") if self.provider.keeps_tools_for_history else ([], None)
        params = self.request.params
        if self.request.stream and self.request.include_usage:
            params = {**params, "stream_options": {"include_usage": True}}  # streamed usage is opt-in upstream too
        config = self.provider.config
        # One LLM request on the event stream; an observer may ask for headers to send with it (traceparent).
        activity = Activity("llm", {
            "provider": config.name, "provider_kind": config.kind, "model": self.model, "operation": "chat",
            "host": self.provider.host, "port": self.provider.port,
            "traceparent": self.activity.headers.get("traceparent")}, parent=current_call.get())
        events = self.catalog.events
        events.begin(activity)
        self.requests += 1
        outcome = "cancelled"  # closed at a yield: the caller went away
        try:
            request = ModelRequest(self.model, self.messages, tools, choice if tools else None, params,
                                   activity.headers)
            if not self.request.stream:
                reply = await self.provider.complete(request)
            else:
                reply, started = None, False
                async for item in self.provider.stream(request):
                    if isinstance(item, ModelReply):
                        reply = item
                        continue
                    if not started and self.texts:
                        item = PARAGRAPH + item
                    started = True
                    yield TextDelta(item)
            assert reply is not None
            outcome = "ok"
            activity.attributes.update(response_model=reply.model, finish_reason=reply.finish_reason,
                                       **_tokens(reply.usage or {}))
        except Exception as exc:
            outcome = failure_outcome(exc)
            raise
        finally:
            events.end(activity, outcome)
        for key, value in (reply.usage or {}).items():
            if isinstance(value, int):
                self.usage[key] += value
        if reply.content:
            self.texts.append(reply.content)
        yield reply

    def context(self, call_id: str, side: str = "server") -> CallContext:
        # A call's trace context is this request's span when it is traced, else what the caller sent.
        return CallContext(conversation_id=self.request.conversation_id, user=self.request.user,
                           tool_call_id=call_id, side=side, metadata=dict(self.request.metadata), surface="chat",
                           **self.who,
                           traceparent=self.activity.headers.get("traceparent") or self.request.traceparent)

    async def hand_back(self, calls: tuple[ToolCall, ...], answers: list[dict[str, Any]], model: str) -> Finished:
        content = PARAGRAPH.join(self.texts)
        visible = {"role": "assistant", "content": content or None, "tool_calls": [c.as_openai() for c in calls]}
        await self.loop.handoffs.remember(self.principal, [*self.request.messages, visible],
                                    self.messages[self.base:] + answers)
        return self.finished(content, calls, "tool_calls", model)

    def finished(self, content: str, calls: tuple[ToolCall, ...], reason: str, model: str) -> Finished:
        self.activity.attributes.update(finish_reason=reason, response_model=model)
        return Finished(content, calls, reason, model, dict(self.usage) or None, tuple(self.trace),
                        self.offer.reasons())


def failure_outcome(exc: Exception) -> str:
    """An LLM request's or a turn's outcome when ``exc`` ended it (the words of ``gateway.events``)."""
    if isinstance(exc, ProviderTimeout):
        return "timeout"
    return "error" if isinstance(exc, GatewayError) else "failed"


def _tokens(usage: Mapping[str, int]) -> dict[str, int]:
    """Token counts by the event stream's names (the loop keeps OpenAI's)."""
    names = {"prompt_tokens": "input_tokens", "completion_tokens": "output_tokens"}
    return {names[key]: value for key, value in usage.items() if key in names}
