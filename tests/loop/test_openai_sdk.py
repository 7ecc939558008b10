"""The official ``openai`` SDK, pointed at our endpoint, completes conversations — streaming and not."""

from __future__ import annotations

import openai
import pytest
from fake_llm import Reply, Status, openai_provider

from gateway.server import create_app
from gateway.settings import ApiKey, Settings, hash_key

QUESTION = "What is the square root of 475695037565?"
MATH = {"gateway": {"toolsets": ["math"]}}


@pytest.fixture
def client(endpoint, defs):
    ep = endpoint(defs)
    with openai.OpenAI(base_url=ep.url + "/v1", api_key="unused", max_retries=0) as sdk:
        yield sdk


def test_sdk_square_root_conversation(client, llm):
    """A non-streaming create() returns the answer, and the trace is readable as an extra field."""
    llm.answer(Reply(tool_calls=[("call_1", "square_root", {"x": 475695037565})]), Reply(content="689706.486532"))
    completion = client.chat.completions.create(model="default", messages=[{"role": "user", "content": QUESTION}],
                                                extra_body=MATH)
    assert completion.choices[0].message.content == "689706.486532"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage.total_tokens == 30
    [execution] = completion.model_extra["tool_executions"]
    assert execution["tool"] == "square_root" and execution["result"] == pytest.approx(689706.486532, abs=1e-6)


def test_sdk_streaming_conversation(client, llm):
    """A streaming create() yields the text in chunks; the tool round arrives as a chunk without choices."""
    llm.answer(Reply(content="Computing.", tool_calls=[("call_1", "square_root", {"x": 475695037565})]),
               Reply(content="It is 689706.486532."))
    stream = client.chat.completions.create(model="default", messages=[{"role": "user", "content": QUESTION}],
                                            stream=True, stream_options={"include_usage": True}, extra_body=MATH)
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Computing.\n\nIt is 689706.486532."
    [executions] = [c.model_extra["tool_executions"] for c in chunks if "tool_executions" in c.model_extra]
    assert executions[0]["tool"] == "square_root"
    assert chunks[-1].usage.total_tokens == 30


def test_sdk_stream_helper_accumulates_the_final_completion(client, llm):
    """The SDK's chat.completions.stream() helper assembles our chunks into a final completion."""
    llm.answer(Reply(tool_calls=[("call_1", "sum", {"a": 2, "b": 2})]), Reply(content="4"))
    with client.chat.completions.stream(model="default", messages=[{"role": "user", "content": "2+2"}],
                                        extra_body=MATH) as stream:
        deltas = [event.delta for event in stream if event.type == "content.delta"]
        final = stream.get_final_completion()
    assert "".join(deltas) == "4" and final.choices[0].message.content == "4"


@pytest.mark.parametrize("stream", [False, True])
def test_sdk_runs_handed_back_client_tools_and_resumes(client, llm, stream):
    """The SDK receives a client tool as ordinary tool_calls, sends its result back, and gets the final answer."""
    llm.answer(Reply(tool_calls=[("call_sum", "sum", {"a": 2, "b": 3}),
                                 ("call_fill", "fill_field", {"field": "total", "value": "5"})]))
    messages: list = [{"role": "user", "content": "Put 2+3 into the total field"}]
    extra = {"gateway": {"toolsets": ["math", "test"]}}
    if stream:
        with client.chat.completions.stream(model="default", messages=messages, extra_body=extra) as events:
            completion = events.get_final_completion()
    else:
        completion = client.chat.completions.create(model="default", messages=messages, extra_body=extra)
    assert completion.choices[0].finish_reason == "tool_calls"
    message = completion.choices[0].message
    [call] = message.tool_calls
    assert (call.id, call.function.name) == ("call_fill", "fill_field")

    messages.append(message)  # the SDK's own message object, as applications usually do
    messages.append({"role": "tool", "tool_call_id": call.id, "content": '"total set to 5"'})
    llm.answer(Reply(content="Done."))
    final = client.chat.completions.create(model="default", messages=messages, extra_body=extra)
    assert final.choices[0].message.content == "Done."
    resumed = llm.requests[1].body["messages"]
    assert [c["id"] for c in resumed[1]["tool_calls"]] == ["call_sum", "call_fill"]
    assert [(m["tool_call_id"], m["content"]) for m in resumed[2:]] == [("call_sum", "5.0"),
                                                                         ("call_fill", "total set to 5")]


def test_sdk_reports_our_errors(client, llm):
    """Request errors and provider failures raise the SDK's exceptions with our message."""
    with pytest.raises(openai.NotFoundError, match="Unknown model 'gpt-4o'"):
        client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "x"}])
    llm.answer(*[Status(500, message="upstream exploded")] * 3)  # the first try and two retries
    with pytest.raises(openai.APIStatusError, match="upstream exploded") as caught:
        client.chat.completions.create(model="default", messages=[{"role": "user", "content": "x"}])
    assert caught.value.status_code == 502


def test_the_served_app_mounts_the_chat_routes(servers, llm, defs, monkeypatch):
    """The app ``tool-gateway serve`` runs (create_app) answers the SDK at /v1, behind its API-key auth."""
    monkeypatch.setenv("FAKE_LLM_KEY", "sk-app")
    settings = Settings(definitions=defs, reload=False, providers={"default": openai_provider(llm)},
                        api_keys=(ApiKey("app", hash_key("k-app"), ("math",)),))
    url = servers.start(create_app(settings), lifespan="on")
    try:
        llm.answer(Reply(tool_calls=[("call_1", "sum", {"a": 1, "b": 2})]), Reply(content="3"))
        with openai.OpenAI(base_url=url + "/v1", api_key="k-app", max_retries=0) as sdk:
            assert [m.id for m in sdk.models.list()] == ["default", "fake-gpt"]
            completion = sdk.chat.completions.create(model="default", messages=[{"role": "user", "content": "1+2"}])
        assert completion.choices[0].message.content == "3"
        assert sorted(t["function"]["name"] for t in llm.requests[0].body["tools"]) == ["square_root", "sum"]
        with openai.OpenAI(base_url=url + "/v1", api_key="wrong", max_retries=0) as sdk, \
                pytest.raises(openai.AuthenticationError):
            sdk.chat.completions.create(model="default", messages=[{"role": "user", "content": "x"}])
    finally:
        servers.stop([url])
