"""Handoffs: what the caller did not see of a handed-back round, put back when it returns — for it alone."""

from __future__ import annotations

import asyncio

from gateway.loop.handoff import Handoffs, order_results
from gateway.state.memory import MemoryState

USER = {"role": "user", "content": "fill and add"}
HANDED = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c_fill", "type": "function", "function": {"name": "fill_field", "arguments": "{}"}}]}
FULL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "c_sum", "type": "function", "function": {"name": "sum", "arguments": "{}"}}, *HANDED["tool_calls"]]}
SERVER_RESULT = {"role": "tool", "tool_call_id": "c_sum", "content": "5"}
CLIENT_RESULT = {"role": "tool", "tool_call_id": "c_fill", "content": "ok"}
PRINCIPAL = ("app", "ala", "conv-1")


async def test_expand_restores_the_round_with_results_in_call_order():
    """The handed-back message is replaced by the full round, and results follow the order of its calls."""
    handoffs = Handoffs()
    await handoffs.remember(PRINCIPAL, [USER, HANDED], [FULL, SERVER_RESULT])
    expanded = await handoffs.expand(PRINCIPAL, [USER, HANDED, CLIENT_RESULT])
    assert expanded == [USER, FULL, SERVER_RESULT, CLIENT_RESULT]


async def test_a_conversation_that_only_looks_alike_is_not_expanded():
    """Another caller, user or conversation with the same messages does not get this round's server results."""
    handoffs = Handoffs()
    await handoffs.remember(PRINCIPAL, [USER, HANDED], [FULL, SERVER_RESULT])
    for other in [("app", "ola", "conv-1"), ("app", "ala", "conv-2"), ("other-app", "ala", "conv-1")]:
        assert await handoffs.expand(other, [USER, HANDED, CLIENT_RESULT]) == [USER, HANDED, CLIENT_RESULT]


async def test_serialisation_differences_of_clients_do_not_matter():
    """A client that adds fields or sends text as content parts still finds its round."""
    handoffs = Handoffs()
    await handoffs.remember(PRINCIPAL, [USER, HANDED], [FULL, SERVER_RESULT])
    echoed = {**HANDED, "refusal": None, "annotations": [], "audio": None}
    parts = {"role": "user", "content": [{"type": "text", "text": "fill and add"}]}
    assert (await handoffs.expand(PRINCIPAL, [parts, echoed, CLIENT_RESULT]))[1] == FULL


async def test_entries_expire():
    """An entry unused for ttl_s is gone: the caller's messages are then kept as they came."""
    handoffs = Handoffs(ttl_s=0.05)
    await handoffs.remember(PRINCIPAL, [USER, HANDED], [FULL, SERVER_RESULT])
    await asyncio.sleep(0.1)
    assert (await handoffs.expand(PRINCIPAL, [USER, HANDED, CLIENT_RESULT]))[1] == HANDED


async def test_entries_are_shared_through_the_state_they_are_given():
    """What one replica's handoffs remember, another's expand, when both use one shared state."""
    state = MemoryState()
    await Handoffs(state).remember(PRINCIPAL, [USER, HANDED], [FULL, SERVER_RESULT])
    assert (await Handoffs(state).expand(PRINCIPAL, [USER, HANDED, CLIENT_RESULT]))[1] == FULL


def test_order_results_leaves_unknown_ids_last():
    """Results are sorted by their call's position; a result for no call keeps its place after the others."""
    stray = {"role": "tool", "tool_call_id": "zz", "content": "?"}
    assert order_results([FULL, stray, CLIENT_RESULT, SERVER_RESULT]) == [FULL, SERVER_RESULT, CLIENT_RESULT, stray]
