"""The bridge tells the gateway's event stream of each page session opened and closed, with how many are open."""

from __future__ import annotations

from gateway.events import Event, EventBus, Observer
from gateway.runtime.bridge import Bridge


class Recorder(Observer):
    def __init__(self) -> None:
        self.events: list[Event] = []

    def event(self, event: Event) -> None:
        self.events.append(event)


def test_sessions_opened_and_closed_are_events_with_the_open_count():
    """Two pages connect and leave: four bridge_session events carry the count after each change; forgetting a
    page twice tells nothing the second time."""
    bus, recorder = EventBus(), Recorder()
    bus.subscribe(recorder)
    bridge = Bridge(events=bus)
    first, second = bridge.connect("127.0.0.1"), bridge.connect(None)
    bridge.disconnect(first)
    bridge.disconnect(first)
    bridge.disconnect(second)
    assert [(e.kind, dict(e.data)) for e in recorder.events] == [
        ("bridge_session", {"change": "opened", "sessions": 1}), ("bridge_session", {"change": "opened", "sessions": 2}),
        ("bridge_session", {"change": "closed", "sessions": 1}), ("bridge_session", {"change": "closed", "sessions": 0})]
