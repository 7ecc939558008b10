"""The live view's record of a call, built lazily (summary and arguments' JSON made when first read), shows what
the call ended with: the same summary, arguments text and hiding as when they were built at the call's end."""

from __future__ import annotations

from gateway.events import CallActivity
from gateway.observe.live import LiveCalls, capped_json


def ended_call(call_id: str, arguments: object, audit_arguments: bool = True) -> CallActivity:
    call = CallActivity("call", id=call_id, tool="sum", surface="rest", caller="key", user="ann",
                        arguments=arguments, version="v1", audit_arguments=audit_arguments)
    call.outcome, call.duration_s, call.trace_id = "error", 0.0012345, "trace-1"
    return call


def test_summary_and_arguments_are_those_the_call_ended_with():
    """Flat, long, and hidden arguments each show as before; the summary keeps its keys, order and values."""
    live = LiveCalls()
    flat, long = {"a": 1, "b": "two"}, {"items": ["x" * 100] * 1000}
    for call_id, arguments, audited in (("flat", flat, True), ("long", long, True), ("hidden", flat, False)):
        live.end(ended_call(call_id, arguments, audited))
    summary = live.get("flat").summary
    assert list(summary) == ["id", "at", "caller", "user", "surface", "tool", "outcome", "duration_ms", "side",
                             "version", "is_error", "trace_id", "conversation_id"]
    assert (summary["duration_ms"], summary["is_error"], summary["trace_id"]) == (1.234, True, "trace-1")
    assert live.get("flat").detail()["arguments"] == capped_json(flat)[0] == '{"a": 1, "b": "two"}'
    assert live.get("long").detail()["arguments"] == capped_json(long)[0]
    assert live.get("long").detail()["arguments_truncated"]
    hidden = live.get("hidden").detail()
    assert hidden["arguments"] is None and hidden["arguments_hidden"] and not hidden["arguments_truncated"]
    assert [s["id"] for s in live.recent()] == ["hidden", "long", "flat"]
    assert live.recent()[2] is summary  # made once, then the same object
