"""The chat loop on the event stream: each request is a ``chat`` activity around its ``llm`` activities and tool
calls, ended with its outcome, then a ``chat_turn`` event counting its LLM requests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fake_llm import Reply, Status, openai_provider

from gateway.events import Activity, Event, Observer

ASK = [{"role": "user", "content": "What is 1 + 2?"}]


class Recorder(Observer):
    """What an observer is told, in order: ("begin" | "end", activity) and ("event", event)."""

    def __init__(self) -> None:
        self.told: list[tuple[str, Any]] = []

    def begin(self, activity: Activity) -> None:
        self.told.append(("begin", activity))

    def end(self, activity: Activity) -> None:
        self.told.append(("end", activity))

    def event(self, event: Event) -> None:
        self.told.append(("event", event))

    def ends(self, kind: str) -> list[Activity]:
        return [a for what, a in self.told if what == "end" and getattr(a, "kind", None) == kind]

    def turns(self) -> list[dict[str, Any]]:
        return [dict(e.data) for what, e in self.told if what == "event" and e.kind == "chat_turn"]


@pytest.fixture
def recorded() -> Iterator[Any]:
    """Start an endpoint with a recorder subscribed to its gateway's events (unsubscribed after the test)."""
    subscribed = []

    def subscribe(ep: Any) -> Recorder:
        recorder = Recorder()
        ep.gateway.events.subscribe(recorder)
        subscribed.append((ep, recorder))
        return recorder

    yield subscribe
    for ep, recorder in subscribed:
        ep.gateway.events.unsubscribe(recorder)


@pytest.mark.parametrize("stream", [False, True])
def test_a_request_is_a_chat_activity_around_llm_requests_and_tool_calls(endpoint, llm, defs, recorded, stream):
    """A request with one tool round tells: chat begins, an llm request (ok, its tokens and finish reason), the
    tool call, a second llm request, chat ends ok with two requests; then chat_turn with rounds 2."""
    ep = endpoint(defs)
    recorder = recorded(ep)
    llm.answer(Reply(tool_calls=[("call_1", "sum", {"a": 1, "b": 2})]), Reply(content="3"))
    assert ep.post({"messages": ASK, "stream": stream, "gateway": {"toolsets": ["math"]}}).status_code == 200
    kinds = [(what, a.kind) for what, a in recorder.told]
    assert kinds == [("begin", "chat"), ("begin", "llm"), ("end", "llm"), ("begin", "call"), ("end", "call"),
                     ("begin", "llm"), ("end", "llm"), ("end", "chat"), ("event", "chat_turn")]
    first, second = recorder.ends("llm")
    assert first.outcome == "ok" and first.attributes["finish_reason"] == "tool_calls"
    assert first.attributes["provider"] == "default" and first.attributes["model"] == "fake-gpt"
    assert first.attributes["operation"] == "chat" and first.attributes["provider_kind"] == "openai"
    if not stream:  # the fake LLM streams usage only when asked to
        assert (first.attributes["input_tokens"], first.attributes["output_tokens"]) == (10, 5)
    assert second.attributes["finish_reason"] == "stop"
    [turn] = recorder.ends("chat")
    assert turn.outcome == "ok" and turn.attributes["requests"] == 2
    assert recorder.turns() == [{"rounds": 2, "outcome": "ok", "provider": "default"}]


def test_a_provider_failure_ends_the_request_as_an_error(endpoint, llm, defs, recorded):
    """An LLM that keeps failing ends its llm activity and the chat activity as "error", told in chat_turn."""
    ep = endpoint(defs, providers={"default": openai_provider(llm, max_retries=0)})
    recorder = recorded(ep)
    llm.answer(Status(500, message="down"))
    assert ep.post({"messages": ASK}).status_code == 502
    assert [a.outcome for a in recorder.ends("llm")] == ["error"]
    assert [a.outcome for a in recorder.ends("chat")] == ["error"]
    assert recorder.turns() == [{"rounds": 1, "outcome": "error", "provider": "default"}]


def test_a_provider_too_slow_ends_the_request_as_a_timeout(endpoint, llm, defs, recorded):
    """An LLM that does not answer within timeout_s ends the llm and chat activities as "timeout"."""
    ep = endpoint(defs, providers={"default": openai_provider(llm, max_retries=0, timeout_s=0.2)})
    recorder = recorded(ep)
    llm.answer(Status(200, delay_s=2))
    assert ep.post({"messages": ASK}).status_code == 504
    assert [a.outcome for a in recorder.ends("llm")] == ["timeout"]
    assert recorder.turns() == [{"rounds": 1, "outcome": "timeout", "provider": "default"}]
