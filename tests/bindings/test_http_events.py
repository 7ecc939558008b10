"""Each request the HTTP binding sends is an ``upstream`` activity on the gateway's event stream: child of its
call, saying where it went (never the path or query), its status, whether an answer came, and carrying the
headers observers ask for (a tracer's ``traceparent``) to the service."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from http_tools import http_tool

from gateway.bindings import BuildEnv
from gateway.catalog.build import build_catalog
from gateway.catalog.snapshot import Catalog
from gateway.definitions.load import load_definitions
from gateway.events import Activity, EventBus, Observer
from gateway.invoke import invoke
from gateway.settings import Settings

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


class Recorder(Observer):
    """Records the upstream activities that end, and asks each to send a ``traceparent``."""

    def __init__(self) -> None:
        self.ended: list[Activity] = []

    def begin(self, activity: Activity) -> None:
        if activity.kind == "upstream":
            activity.headers["traceparent"] = TRACEPARENT

    def end(self, activity: Activity) -> None:
        if activity.kind == "upstream":
            self.ended.append(activity)


def build(tmp_path: Path, events: EventBus, *tools: dict[str, Any]) -> Catalog:
    root = tmp_path / "defs"
    root.mkdir(exist_ok=True)
    (root / "tools.yaml").write_text(yaml.safe_dump({"tools": list(tools)}), encoding="utf-8")
    settings = Settings(definitions=root)
    return build_catalog(load_definitions(root), settings, BuildEnv(settings=settings, root=root, events=events))


def recording() -> tuple[EventBus, Recorder]:
    bus, recorder = EventBus(), Recorder()
    bus.subscribe(recorder)
    return bus, recorder


async def test_each_request_is_an_activity_under_its_call_and_sends_the_observers_headers(tmp_path, upstream):
    """A call whose request is redirected once gives two upstream activities, both children of the call, each
    with the tool, method, host and status and no path or query; the service receives the traceparent."""
    bus, recorder = recording()
    secret_query = "/echo/here?token=s3cret"
    catalog = build(tmp_path, bus, http_tool({"url": upstream.at(f"/redirect?to={secret_query}&code=307")}))
    result = await invoke(catalog, "t", {})
    assert not result.is_error, result.text
    assert result.value["headers"]["traceparent"] == TRACEPARENT
    hops = recorder.ended
    assert [(hop.attributes["status"], hop.outcome) for hop in hops] == [(307, "ok"), (200, "ok")]
    for hop in hops:
        assert hop.parent is not None and hop.parent.tool == "t"
        assert {k: v for k, v in hop.attributes.items() if k != "status"} == {
            "tool": "t", "method": "GET", "scheme": "http", "host": "127.0.0.1", "port": upstream.port}
        assert "s3cret" not in repr(hop.attributes)


async def test_an_answered_failure_is_ok_and_no_answer_is_an_error(tmp_path, upstream, closed_port):
    """A 503 is an answer (outcome ok, its status kept); a refused connection is outcome error with no status."""
    bus, recorder = recording()
    catalog = build(tmp_path, bus, http_tool({"url": upstream.at("/status/503")}, tool_id="down"),
                    http_tool({"url": f"http://127.0.0.1:{closed_port}/x"}, tool_id="closed"))
    assert (await invoke(catalog, "down", {})).is_error
    assert (await invoke(catalog, "closed", {})).is_error
    assert [(hop.attributes["tool"], hop.attributes.get("status"), hop.outcome) for hop in recorder.ended] == [
        ("down", 503, "ok"), ("closed", None, "error")]


async def test_an_answer_too_large_to_read_is_still_an_answer(tmp_path, upstream):
    """A body over the tool's max_bytes fails the call but the request ended with an answer: outcome ok."""
    bus, recorder = recording()
    catalog = build(tmp_path, bus, http_tool({"url": upstream.at("/big?n=5000"), "response": {"max_bytes": 100}}))
    assert "larger than 100 bytes" in (await invoke(catalog, "t", {})).text
    assert [(hop.attributes["status"], hop.outcome) for hop in recorder.ended] == [(200, "ok")]
