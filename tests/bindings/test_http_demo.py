"""The shipped HTTP example tools (tool-definitions/http-demo.yaml) work against the demo API the gateway serves."""

from __future__ import annotations

import pytest
from support import EXAMPLES, catalog_for

from gateway.context import CallContext
from gateway.invoke import invoke

SHIPPED_ORIGIN = "http://127.0.0.1:8000"


@pytest.fixture
def demo(upstream, tmp_path):
    """The shipped example file, pointed at the test server (which mounts the demo API under /demo)."""
    root = tmp_path / "defs"
    root.mkdir()
    text = (EXAMPLES / "http-demo.yaml").read_text(encoding="utf-8")
    assert text.count(SHIPPED_ORIGIN + "/demo/") == 3
    (root / "http-demo.yaml").write_text(text.replace(SHIPPED_ORIGIN, upstream.url), encoding="utf-8")
    return catalog_for(root)


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
