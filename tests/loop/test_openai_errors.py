"""The chat endpoint's errors as OpenAI sends them: ``{"error": {message, type, param, code}}`` with a string or
null ``code``, so the official SDK raises the class a client expects and reads the code it branches on."""

from __future__ import annotations

import json
from typing import Any

import httpx
import openai
import pytest
from fake_llm import Reply, Status

from gateway.settings import ApiKey, hash_key

ASK = [{"role": "user", "content": "x"}]


@pytest.fixture
def sdk(endpoint, defs):
    with openai.OpenAI(base_url=endpoint(defs).url + "/v1", api_key="unused", max_retries=0) as client:
        yield client


def assert_openai_shape(error: dict[str, Any]) -> None:
    assert set(error) == {"message", "type", "param", "code"}
    assert isinstance(error["message"], str) and isinstance(error["type"], str)
    assert error["code"] is None or isinstance(error["code"], str)
    assert error["param"] is None or isinstance(error["param"], str)


def test_unknown_model_is_not_found_with_code_model_not_found(sdk, llm):
    """A model no provider answers to raises openai.NotFoundError with code model_not_found and param model."""
    with pytest.raises(openai.NotFoundError) as caught:
        sdk.chat.completions.create(model="gpt-9", messages=ASK)
    assert caught.value.code == "model_not_found" and caught.value.param == "model"
    assert caught.value.type == "invalid_request_error"
    assert "gpt-9" in caught.value.message and "/v1/models" in caught.value.message
    assert llm.requests == []


def test_a_wrong_key_is_an_authentication_error_with_code_invalid_api_key(endpoint, llm, defs):
    """A wrong key raises openai.AuthenticationError with code invalid_api_key; a missing key is a 401 with a null
    code, as OpenAI answers both."""
    ep = endpoint(defs, api_keys=(ApiKey("app", hash_key("k-app")),))
    with openai.OpenAI(base_url=ep.url + "/v1", api_key="wrong", max_retries=0) as client, \
            pytest.raises(openai.AuthenticationError) as caught:
        client.chat.completions.create(model="default", messages=ASK)
    assert (caught.value.code, caught.value.type) == ("invalid_api_key", "invalid_request_error")
    missing = ep.post({"messages": ASK})
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    assert_openai_shape(missing.json()["error"])
    assert missing.json()["error"]["code"] is None
    models = httpx.get(ep.url + "/v1/models", headers={"Authorization": "Bearer wrong"}, timeout=30)
    assert models.status_code == 401 and models.json()["error"]["code"] == "invalid_api_key"


@pytest.mark.parametrize("body, param", [
    ({"messages": ASK, "n": 2}, "n"),
    ({"messages": []}, "messages"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
    ({"messages": [{"role": ["user"], "content": "x"}]}, "messages[0].role"),  # unhashable: was a 500
    ({"messages": ASK, "tool_choice": "sometimes"}, "tool_choice"),
    ({"messages": ASK, "gateway": {"side": "browser"}}, "gateway.side"),
])
def test_a_bad_request_names_its_param_and_has_no_numeric_code(endpoint, llm, defs, body, param):
    """A malformed request is a 400 whose error names the offending field as ``param`` and whose ``code`` is a
    string or null, never the HTTP status."""
    response = endpoint(defs).post(body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert_openai_shape(error)
    assert error["type"] == "invalid_request_error" and error["param"] == param


def test_the_sdk_raises_bad_request_with_a_null_code(sdk, llm):
    """openai.BadRequestError carries code None (not "400") for a request OpenAI would refuse with a null code."""
    with pytest.raises(openai.BadRequestError) as caught:
        sdk.chat.completions.create(model="default", messages=ASK, n=3)
    assert caught.value.code is None and caught.value.param == "n"


def test_provider_failures_are_server_errors_with_gateway_codes(sdk, llm):
    """The provider failing is openai.InternalServerError (502) with type server_error and code provider_error."""
    llm.answer(Status(400, message="upstream said no"))
    with pytest.raises(openai.InternalServerError) as caught:
        sdk.chat.completions.create(model="default", messages=ASK)
    assert caught.value.status_code == 502
    assert (caught.value.type, caught.value.code) == ("server_error", "provider_error")


def test_a_failure_after_the_stream_began_raises_with_its_code(sdk, llm):
    """An error event mid-stream has the same shape: the SDK raises openai.APIError with code provider_error."""
    llm.answer(Reply(content="Computing.", tool_calls=[("c1", "sum", {"a": 1, "b": 1})]), Status(400, message="nope"))
    stream = sdk.chat.completions.create(model="default", messages=ASK, stream=True,
                                         extra_body={"gateway": {"toolsets": ["math"]}})
    with pytest.raises(openai.APIError) as caught:
        list(stream)
    assert caught.value.code == "provider_error" and "nope" in caught.value.message


def test_no_provider_configured_is_a_server_error_naming_the_cause(endpoint, defs):
    """Without providers the 503 says so with its own code, in OpenAI's shape."""
    response = endpoint(defs, providers={}).post({"messages": ASK})
    assert response.status_code == 503
    error = response.json()["error"]
    assert_openai_shape(error)
    assert (error["type"], error["code"]) == ("server_error", "provider_not_configured")


def test_a_bug_is_a_server_error_with_a_null_code(endpoint, llm, defs, monkeypatch):
    """An unexpected failure is a 500 with type server_error and null code and param."""
    ep = endpoint(defs)

    def broken(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(ep.loop, "turn", broken)
    error = ep.post({"messages": ASK}).json()["error"]
    assert_openai_shape(error)
    assert (error["type"], error["code"], error["param"]) == ("server_error", None, None)


def test_a_body_over_the_limit_is_an_invalid_request(endpoint, llm, defs):
    """A body over max_body_bytes is a 413 in OpenAI's shape."""
    response = endpoint(defs, max_body_bytes=1000).post({"messages": [{"role": "user", "content": "x" * 2000}]})
    assert response.status_code == 413
    assert_openai_shape(response.json()["error"])
    assert json.loads(response.text)["error"]["type"] == "invalid_request_error"
