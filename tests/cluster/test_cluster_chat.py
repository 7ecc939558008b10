"""Chat across replicas: the hand-back history is in the shared state, so a follow-up may reach any replica."""

from __future__ import annotations

import httpx
from conftest import Cluster
from fake_llm import Reply

FILL = {"type": "function", "function": {"name": "fill_field", "description": "Fills a field of the page.",
                                         "parameters": {"type": "object", "properties": {"value": {"type": "string"}}}}}
QUESTION = [{"role": "user", "content": "Put 2+3 into the total field"}]


def handed_back(cluster: Cluster) -> tuple[httpx.Response, dict]:
    """A first request (through nginx) whose round runs ``sum`` on the gateway and hands ``fill_field`` back."""
    cluster.llm.answer(Reply(tool_calls=[("call_sum", "sum", {"a": 2, "b": 3}),
                                         ("call_fill", "fill_field", {"value": "5"})]))
    first = httpx.post(f"{cluster.url}/v1/chat/completions", headers=cluster.headers(), timeout=30,
                       json={"messages": QUESTION, "tools": [FILL]})
    assert first.status_code == 200, first.text
    assert first.json()["choices"][0]["finish_reason"] == "tool_calls"
    return first, first.json()["choices"][0]["message"]


def follow_up(message: dict) -> dict:
    return {"messages": [*QUESTION, message, {"role": "tool", "tool_call_id": "call_fill", "content": "filled"}],
            "tools": [FILL]}


def test_a_follow_up_on_another_replica_continues_with_the_whole_round(cluster: Cluster) -> None:
    """A chat turn hands back a client tool on one replica; the caller's follow-up, sent to another replica,
    continues the turn, and the model sees the server call that replica never ran (sum and its result)."""
    first, message = handed_back(cluster)
    other = next(port for port, replica in cluster.ids.items() if replica != cluster.replica(first))
    cluster.llm.answer(Reply(content="Done: the total is 5."))
    second = httpx.post(f"http://127.0.0.1:{other}/v1/chat/completions", headers=cluster.headers(), timeout=30,
                        json=follow_up(message))
    assert second.status_code == 200, second.text
    assert cluster.replica(second) != cluster.replica(first)
    assert second.json()["choices"][0]["message"]["content"] == "Done: the total is 5."
    sent = cluster.llm.requests[1].body["messages"]
    assert [c["id"] for c in sent[1]["tool_calls"]] == ["call_sum", "call_fill"]
    assert [(m["tool_call_id"], m["content"]) for m in sent[2:]] == [("call_sum", "5.0"), ("call_fill", "filled")]
