"""Handoffs: what the caller did not see of a handed-back round, put back when it returns — for it alone."""

from __future__ import annotations

from gateway.loop.handoff import Handoffs, order_results

USER = {"role": "user", "content": "fill and add"}
HANDED = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c_fill", "type": "function", "function": {"name": "fill_field", "arguments": "{}"}}]}
FULL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c_sum", "type": "function", "function": {"name": "sum", "arguments": "{}"}}, *HANDED["tool_calls"]]}
SERVER_RESULT = {"role": "tool", "tool_call_id": "c_sum", "content": "5"}
CLIENT_RESULT = {"role": "tool", "tool_call_id": "c_fill", "content": "ok"}
PRINCIPAL = ("app", "ala", "conv-1")


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_expand_restores_the_round_with_results_in_call_order():
    """The handed-back message is replaced by the full round, and results follow the order of its calls."""
    handoffs = Handoffs()
    handoffs.remember(PRINCIPAL, [USER, HANDED], [FULL, SERVER_RESULT])
    expanded = handoffs.expand(PRINCIPAL, [USER, HANDED, CLIENT_RESULT])
    assert expanded == [USER, FULL, SERVER_RESULT, CLIENT_RESULT]


def test_a_conversation_that_only_looks_alike_is_not_expanded():
    """Another caller, user or conversation with the same messages does not get this round's server results."""
    handoffs = Handoffs()
    handoffs.remember(PRINCIPAL, [USER, HANDED], [FULL, SERVER_RESULT])
    for other in [("app", "ola", "conv-1"), ("app", "ala", "conv-2"), ("other-app", "ala", "conv-1")]:
        assert handoffs.expand(other, [USER, HANDED, CLIENT_RESULT]) == [USER, HANDED, CLIENT_RESULT]


def test_serialisation_differences_of_clients_do_not_matter():
    """A client that adds fields or sends text as content parts still finds its round."""
    handoffs = Handoffs()
    handoffs.remember(PRINCIPAL, [USER, HANDED], [FULL, SERVER_RESULT])
    echoed = {**HANDED, "refusal": None, "annotations": [], "audio": None}
    parts = {"role": "user", "content": [{"type": "text", "text": "fill and add"}]}
    assert handoffs.expand(PRINCIPAL, [parts, echoed, CLIENT_RESULT])[1] == FULL


def test_entries_expire_and_are_bounded():
    """An entry unused for ttl_s is gone; past max_entries the least recently used goes first."""
    clock = Clock()
    handoffs = Handoffs(ttl_s=60, max_entries=2, clock=clock)
    handoffs.remember(PRINCIPAL, [USER, HANDED], [FULL, SERVER_RESULT])
    clock.now = 61
    assert handoffs.expand(PRINCIPAL, [USER, HANDED, CLIENT_RESULT])[1] == HANDED
    for user in ("a", "b", "c"):
        handoffs.remember(("app", user, None), [USER, HANDED], [FULL, SERVER_RESULT])
    assert handoffs.expand(("app", "a", None), [USER, HANDED])[1] == HANDED
    assert handoffs.expand(("app", "c", None), [USER, HANDED])[1] == FULL


def test_order_results_leaves_unknown_ids_last():
    """Results are sorted by their call's position; a result for no call keeps its place after the others."""
    stray = {"role": "tool", "tool_call_id": "zz", "content": "?"}
    assert order_results([FULL, stray, CLIENT_RESULT, SERVER_RESULT]) == [FULL, SERVER_RESULT, CLIENT_RESULT, stray]
