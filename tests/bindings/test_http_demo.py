"""The shipped HTTP example tools (tool-definitions/http-demo.yaml) work against the demo API the gateway serves."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from support import EXAMPLES, catalog_for, serve_process

from gateway.context import CallContext
from gateway.invoke import invoke
from gateway.settings import ApiKey, Settings, hash_key
from gateway.upstream.address import base_url


@pytest.fixture
def demo(upstream, tmp_path):
    """The shipped example file as the gateway builds it when it serves on the test server's port (which mounts
    the demo API under /demo)."""
    root = tmp_path / "defs"
    root.mkdir()
    (root / "http-demo.yaml").write_text((EXAMPLES / "http-demo.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    return catalog_for(root, port=upstream.port)


def test_shipped_file_builds_cleanly(tmp_path):
    """The example file as shipped builds with no problem and no warning."""
    root = tmp_path / "defs"
    root.mkdir()
    (root / "http-demo.yaml").write_text((EXAMPLES / "http-demo.yaml").read_text(encoding="utf-8"))
    catalog = catalog_for(root)
    assert sorted(catalog.tools) == ["add_reading", "get_station", "search_stations"]
    assert catalog.warnings == ()


async def test_search_stations_renders_a_list(demo):
    """Search sends the query parameters given (omitting the others) and renders the matches as lines."""
    result = await invoke(demo, "search_stations", {"country": "no", "limit": 2})
    assert result.text == "oslo-blindern: Oslo Blindern (NO, 94 m)\nbergen-florida: Bergen Florida (NO, 12 m)\n"
    none = await invoke(demo, "search_stations", {"query": "atlantis"})
    assert none.text == "No station matches."


async def test_get_station_is_structured(demo):
    """get_station returns the station as JSON that passes the tool's output schema."""
    result = await invoke(demo, "get_station", {"station_id": "reykjavik"})
    assert result.structured and result.value["name"] == "Reykjavík"
    assert result.value["latest_reading"]["temperature_c"] == 2.8


async def test_unknown_station_is_an_error_result(demo):
    """An unknown id becomes the API's 404 message, which tells the LLM how to find a valid id."""
    result = await invoke(demo, "get_station", {"station_id": "atlantis"})
    assert result.is_error
    assert "HTTP 404 Not Found (check the arguments)" in result.text
    assert "no station 'atlantis' (search with GET /demo/stations?q=...)" in result.text


async def test_add_reading_posts_typed_json(demo):
    """add_reading sends numbers, lists and null as JSON types, leaves out omitted fields, and the API stores it."""
    result = await invoke(demo, "add_reading", {"station_id": "valencia", "temperature_c": 21.5,
                                                "conditions": ["sunny", "breezy"], "note": None},
                          CallContext(conversation_id="c-1"))
    assert not result.is_error, result.text
    assert result.value["temperature_c"] == 21.5
    assert result.value["conditions"] == ["sunny", "breezy"]
    assert result.value["wind_kph"] is None and result.value["note"] is None
    latest = (await invoke(demo, "get_station", {"station_id": "valencia"})).value["latest_reading"]
    assert latest == result.value


async def test_invalid_arguments_never_reach_the_api(demo):
    """Arguments are checked against the input schema before any request (a 3-letter country code)."""
    result = await invoke(demo, "search_stations", {"country": "NOR"})
    assert result.is_error and "at $.country" in result.text


@pytest.mark.parametrize(("settings", "expected"), [
    ({}, "http://127.0.0.1:8000"),
    ({"port": 8765}, "http://127.0.0.1:8765"),
    ({"host": "0.0.0.0", "port": 9000}, "http://127.0.0.1:9000"),  # auth off: served on loopback only
    ({"host": "0.0.0.0", "api_keys": (ApiKey("k", hash_key("k")),)}, "http://127.0.0.1:8000"),
    ({"host": "10.1.2.3", "api_keys": (ApiKey("k", hash_key("k")),)}, "http://10.1.2.3:8000"),
    ({"host": "::1", "port": 8001}, "http://[::1]:8001"),
    ({"host": "localhost"}, "http://127.0.0.1:8000"),
])
def test_gateway_base_url_is_the_address_served(settings, expected):
    """{{ gateway.base_url }} names where the gateway listens, as seen from itself: its port, and its bound
    host (loopback where it binds every interface or is not allowed to bind another)."""
    assert base_url(Settings(**settings)) == expected


async def test_gateway_base_url_is_fixed_when_the_catalog_is_built(tmp_path, closed_port):
    """The url's origin comes from the settings the catalog is built with; a call's arguments fill only the
    path, as one segment."""
    root = tmp_path / "defs"
    root.mkdir()
    (root / "http-demo.yaml").write_text((EXAMPLES / "http-demo.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    catalog = catalog_for(root, port=closed_port)
    result = await invoke(catalog, "get_station", {"station_id": "http://evil.example:81/x"})
    assert result.is_error and f"GET http://127.0.0.1:{closed_port}/demo/stations/http%3A%2F%2Fevil.example%3A81%2Fx" \
        in result.text
    assert f"127.0.0.1:{closed_port} refused the connection" in result.text


def test_shipped_demo_works_on_any_port(examples_dir: Path):
    """`tool-gateway serve --port N` (not 8000): search_stations, get_station and add_reading reach the demo API
    of the gateway that serves them."""
    replies = {}

    def call_demo_tools(url: str) -> None:
        with httpx.Client(base_url=url, timeout=30) as client:
            replies["found"] = client.post("/tools/search_stations/call", json={"country": "NO", "limit": 1}).json()
            replies["station"] = client.post("/tools/get_station/call", json={"station_id": "reykjavik"}).json()
            replies["added"] = client.post("/tools/add_reading/call",
                                           json={"station_id": "valencia", "temperature_c": 20}).json()

    serve_process(examples_dir, while_running=call_demo_tools)
    found, station, added = replies["found"], replies["station"], replies["added"]
    assert found["is_error"] is False and found["text"] == "oslo-blindern: Oslo Blindern (NO, 94 m)\n", found
    assert station["is_error"] is False and station["result"]["name"] == "Reykjavík", station
    assert added["is_error"] is False and added["result"]["temperature_c"] == 20, added
