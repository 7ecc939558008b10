"""The cheaper ways the event stream and its consumers do their work per call say the same as the slower ones did:
the bus tells each observer what it observes in the same order, call ids stay unique (across a fork too), sizes
and lines are what json makes of them, and a line stays ASCII JSON whatever the call carried."""

from __future__ import annotations

import json
import os

import pytest

from gateway.events import Activity, CallActivity, Event, EventBus, Observer, new_call_id
from gateway.observe.audit import call_line
from gateway.observe.logs import encoded, iso_time

ODD_VALUES = [{"a": 1, "b": "two"}, {"name": "zoë", "city": "Zürich 北京"}, {"text": "lone \ud800 surrogate"},
              {"big": 2 ** 70}, {"float": 1e16, "small": 1e-7, "half": 0.5}, {1: "int key"}, ["a", None, True],
              {"nested": {"deep": [1, {"x": "é"}]}}, "plain text", None]


class Recorder(Observer):
    def __init__(self, name: str, seen: list[str]):
        self.name, self.seen = name, seen

    def begin(self, activity: Activity) -> None:
        self.seen.append(f"begin {self.name}")

    def end(self, activity: Activity) -> None:
        self.seen.append(f"end {self.name}")


class EndsOnly(Observer):
    def __init__(self, seen: list[str]):
        self.seen = seen

    def end(self, activity: Activity) -> None:
        self.seen.append(f"end only {activity.outcome}")


class EventsOnly(Observer):
    def __init__(self, seen: list[str]):
        self.seen = seen

    def event(self, event: Event) -> None:
        self.seen.append(f"event {event.kind}")


def test_the_bus_tells_each_observer_what_it_observes_nested_and_in_order():
    """Observers begin in subscription order and end in reverse, those overriding only end or only event get just
    that, and an unsubscribed observer hears nothing more."""
    seen: list[str] = []
    bus = EventBus()
    first, ends, events, second = Recorder("a", seen), EndsOnly(seen), EventsOnly(seen), Recorder("b", seen)
    for observer in (first, ends, events, second):
        bus.subscribe(observer)
    call = CallActivity("call")
    bus.begin(call)
    bus.end(call, "ok")
    bus.emit("reload", ok=True)
    assert seen == ["begin a", "begin b", "end b", "end only ok", "end a", "event reload"]
    assert bus.observers == (first, ends, events, second)
    seen.clear()
    bus.unsubscribe(first)
    bus.unsubscribe(events)
    with bus.activity(CallActivity("call")):
        pass
    bus.emit("reload", ok=True)
    assert seen == ["begin b", "end b", "end only ok"]


def test_call_ids_are_sixteen_hex_digits_unique_and_differ_in_a_forked_child():
    """Call ids are 16 lowercase hex digits, 20,000 in a row all different, and a forked child (a server's worker
    process) does not repeat the parent's next ids."""
    ids = {new_call_id() for _ in range(20_000)}
    assert len(ids) == 20_000 and all(len(i) == 16 and int(i, 16) >= 0 and i == i.lower() for i in ids)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover — the child's side
        os.write(write, " ".join(new_call_id() for _ in range(50)).encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    with os.fdopen(read) as pipe:
        theirs = set(pipe.read().split())
    ours = {new_call_id() for _ in range(50)}
    assert len(theirs) == 50 and not theirs & ours


@pytest.mark.parametrize("arguments", ODD_VALUES)
def test_argument_bytes_is_the_size_of_compact_utf8_json(arguments):
    """A call's argument size is that of json's compact UTF-8 text of its arguments (0 when json cannot make one),
    but for a float json writes with an exponent, which may be spelt a byte or two shorter (``1e16``)."""
    try:
        expected = len(json.dumps(arguments, separators=(",", ":"), ensure_ascii=False).encode())
    except ValueError:  # a lone surrogate has no UTF-8
        expected = 0
    if isinstance(arguments, str):
        expected = len(arguments)
    measured = CallActivity("call", arguments=arguments).argument_bytes()
    if isinstance(arguments, dict) and "float" in arguments:
        assert expected - 2 * len(arguments) <= measured <= expected
    else:
        assert measured == expected


@pytest.mark.parametrize("value", ODD_VALUES)
def test_a_json_line_is_ascii_and_says_what_json_says(value):
    """A log or audit line is one line of ASCII JSON that reads back as json's own line of the same entry."""
    entry = {"time": iso_time(1764508696.5), "message": "m", "value": value}
    line = encoded(entry)
    assert line.isascii() and "\n" not in line
    assert json.loads(line) == json.loads(json.dumps(entry, default=str))


def test_an_audit_line_of_non_ascii_arguments_is_ascii_and_keeps_them():
    """An audit line of a call whose arguments and user are not ASCII is ASCII JSON holding them unchanged, with the
    digest of their canonical UTF-8 JSON."""
    call = CallActivity("call", id="0123456789abcdef", tool="t", surface="rest", user="zoë",
                        arguments={"name": "Zürich 北京", "n": 1})
    call.outcome, call.duration_s = "ok", 0.001
    line = encoded(call_line(call))
    entry = json.loads(line)
    assert line.isascii() and entry["user"] == "zoë" and entry["arguments"] == {"name": "Zürich 北京", "n": 1}
    assert entry["argument_bytes"] == len(json.dumps(call.arguments, sort_keys=True, separators=(",", ":"),
                                                     ensure_ascii=False).encode())


def test_calls_in_flight_counts_the_calls_between_begin_and_end():
    """``tool_gateway_calls_in_flight`` is the number of calls begun and not yet ended when scraped."""
    from types import SimpleNamespace

    from prometheus_client import generate_latest
    from prometheus_client.parser import text_string_to_metric_families

    from gateway.observe.metrics import Metrics

    gateway = SimpleNamespace(observers={}, catalog=SimpleNamespace(version="v1", tools={}, held=()))
    metrics, bus = Metrics(gateway), EventBus()
    bus.subscribe(metrics)

    def in_flight() -> float:
        text = generate_latest(metrics.registry).decode()
        family, = (f for f in text_string_to_metric_families(text) if f.name == "tool_gateway_calls_in_flight")
        return family.samples[0].value

    first, second = CallActivity("call", tool="t", surface="rest"), CallActivity("call", tool="t", surface="mcp")
    bus.begin(first)
    bus.begin(second)
    assert in_flight() == 2
    bus.end(first, "ok")
    assert in_flight() == 1
    bus.end(second, "timeout")
    assert in_flight() == 0
