"""Chat across replicas: the hand-back history is in the shared state, so a follow-up may reach any replica."""

from __future__ import annotations

import httpx
from cluster_support import Cluster, follow_up, handed_back
from fake_llm import Reply


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
