"""``model`` in a chat request: a provider name, ``provider/model``, or a configured model's own name when exactly
one provider has it; ``GET /v1/models`` lists exactly what is accepted."""

from __future__ import annotations

import httpx
import openai
import pytest
from fake_llm import Reply, openai_provider

ASK = [{"role": "user", "content": "x"}]


def sent_models(llm) -> list[str]:
    return [sent.body["model"] for sent in llm.requests]


def test_the_configured_model_name_selects_its_provider(endpoint, llm, defs):
    """A client that sends the provider's own model name (as OpenAI clients do) gets that provider."""
    ep = endpoint(defs, providers={"default": openai_provider(llm), "other": openai_provider(llm, model="m2")})
    llm.answer(Reply(content="a"), Reply(content="b"))
    for model in ("m2", "fake-gpt"):
        response = ep.post({"model": model, "messages": ASK})
        assert response.status_code == 200, response.text
    assert sent_models(llm) == ["m2", "fake-gpt"]


def test_the_provider_and_provider_slash_model_forms_still_work(endpoint, llm, defs):
    """A provider's name picks it with its model; ``provider/model`` picks it with another model."""
    ep = endpoint(defs, providers={"default": openai_provider(llm), "other": openai_provider(llm, model="m2")})
    llm.answer(Reply(content="a"), Reply(content="b"))
    ep.post({"model": "other", "messages": ASK})
    ep.post({"model": "other/gpt-4o", "messages": ASK})
    assert sent_models(llm) == ["m2", "gpt-4o"]


def test_a_model_name_with_a_slash_is_matched_whole_first(endpoint, llm, defs):
    """A configured model such as ``meta-llama/Llama-3`` is its provider's name for it, not provider 'meta-llama'."""
    ep = endpoint(defs, providers={"local": openai_provider(llm, model="meta-llama/Llama-3")})
    llm.answer(Reply(content="a"))
    assert ep.post({"model": "meta-llama/Llama-3", "messages": ASK}).status_code == 200
    assert sent_models(llm) == ["meta-llama/Llama-3"]


def test_a_model_several_providers_serve_is_refused_naming_them(endpoint, llm, defs):
    """A model name configured for two providers is ambiguous: 400 naming both, with param model."""
    shared = openai_provider(llm, model="shared")
    ep = endpoint(defs, providers={"a": shared, "b": shared})
    response = ep.post({"model": "shared", "messages": ASK})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["param"] == "model" and "'a'" in error["message"] and "'b'" in error["message"]
    assert llm.requests == []


def test_an_unknown_model_lists_what_is_accepted(endpoint, llm, defs):
    """An unknown model is a 404 model_not_found whose message names the accepted names."""
    ep = endpoint(defs, providers={"default": openai_provider(llm)})
    error = ep.post({"model": "gpt-9", "messages": ASK}).json()["error"]
    assert error["code"] == "model_not_found"
    assert "default" in error["message"] and "fake-gpt" in error["message"]


@pytest.mark.parametrize("providers", [
    {"default": {}},
    {"default": {}, "other": {"model": "m2"}},
    {"a": {"model": "shared"}, "b": {"model": "shared"}, "c": {"model": "c"}},
])
def test_every_listed_model_is_accepted(endpoint, llm, defs, providers):
    """GET /v1/models lists provider names and the model names that select one provider; each one listed is
    accepted by the chat endpoint (through the openai SDK), and an ambiguous model name is not listed."""
    ep = endpoint(defs, providers={name: openai_provider(llm, **extra) for name, extra in providers.items()})
    with openai.OpenAI(base_url=ep.url + "/v1", api_key="unused", max_retries=0) as sdk:
        listed = [model.id for model in sdk.models.list()]
        assert set(providers) <= set(listed) and "shared" not in listed
        assert len(listed) == len(set(listed))
        for model in listed:
            llm.answer(Reply(content="ok"))
            assert sdk.chat.completions.create(model=model, messages=ASK).choices[0].message.content == "ok"


def test_models_names_the_provider_behind_each_entry(endpoint, llm, defs):
    """Each /v1/models entry says, in owned_by, which provider (and kind) it reaches."""
    ep = endpoint(defs, providers={"default": openai_provider(llm), "other": openai_provider(llm, model="m2")})
    data = httpx.get(ep.url + "/v1/models", timeout=30).json()["data"]
    owners = {entry["id"]: entry["owned_by"] for entry in data}
    assert owners["m2"] == owners["other"] and "'other'" in owners["m2"] and "openai" in owners["m2"]
    assert all(entry["object"] == "model" for entry in data)
