"""What the (fake) LLM is told about return values through the chat loop: return_schema description, or nothing."""

from __future__ import annotations

from typing import Any

import pytest
from fake_llm import Reply, anthropic_provider, openai_provider

LIGHTS = "Returns: {id: integer /* The light's id, for change_state. */; name: string"
ASK = {"messages": [{"role": "user", "content": "Turn on the porch light."}], "gateway": {"toolsets": ["home"]}}


def _told(sent: Any) -> dict[str, str]:
    """Each offered tool's description, from an OpenAI or an Anthropic request."""
    return {(t.get("function") or t)["name"]: (t.get("function") or t)["description"] for t in sent.body["tools"]}


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_description_mode_tells_the_model_what_tools_return(endpoint, llm, defs, kind):
    """With return_schema: description, the request the provider receives describes each tool's return value."""
    provider = (openai_provider if kind == "openai" else anthropic_provider)(llm)
    ep = endpoint(defs, providers={"default": provider}, return_schema="description")
    llm.answer(Reply(content="Done."))
    assert ep.post({"model": "default", **ASK}).status_code == 200
    told = _told(llm.requests[0])
    assert LIGHTS in told["change_state"] and told["change_state"].endswith("— A light and its current state.")
    assert "\n\nReturns: {id: integer" in told["get_lights"] and told["get_lights"].endswith("}[]")


def test_none_mode_tells_the_model_nothing_more(endpoint, llm, defs):
    """With the default return_schema (none), descriptions are the YAML's ai_description alone."""
    ep = endpoint(defs)
    llm.answer(Reply(content="Done."))
    assert ep.post(ASK).status_code == 200
    told = _told(llm.requests[0])
    assert told["change_state"].startswith("Changes the state of one light") and "Returns:" not in told["change_state"]
    assert "Returns:" not in told["get_lights"]


def test_the_model_reads_results_of_the_derived_schema(endpoint, llm, defs):
    """A call of change_state (derived output schema) is validated and its JSON result reaches the model."""
    ep = endpoint(defs, return_schema="description")
    llm.answer(Reply(tool_calls=[("call_1", "change_state", {"id": 2, "is_on": True})]), Reply(content="On."))
    body = ep.post(ASK).json()
    [execution] = body["tool_executions"]
    assert execution["is_error"] is False and execution["result"]["is_on"] is True
    [tool_message] = [m for m in llm.requests[1].body["messages"] if m["role"] == "tool"]
    assert '"is_on": true' in tool_message["content"]
