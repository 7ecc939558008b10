"""``render`` over a catalog: memoised per catalog, per-tool entries reused for subsets, one unadaptable tool
never breaks a list, and every shipped example tool exports in every format."""

from __future__ import annotations

import pytest

from gateway.catalog.build import build_catalog
from gateway.catalog.cache import BuildCache
from gateway.definitions.load import DefinitionsCache, load_definitions
from gateway.errors import BadRequest
from gateway.formats import FORMATS, render, render_tool, render_tools
from gateway.settings import load_settings


def _catalog(directory):
    settings = load_settings(None, environ={}, definitions=directory)
    return build_catalog(load_definitions(directory), settings)


@pytest.fixture(scope="module")
def shipped(shipped_dir):
    return _catalog(shipped_dir)


def test_every_shipped_tool_exports_in_every_format(shipped, fmt, provider_types):
    """All shipped example tools render in each format without diagnostics and pass the provider SDK types."""
    rendered = render(shipped, fmt)
    assert rendered.diagnostics == []
    assert len(rendered.tools) == len(shipped.tools)
    for declaration in rendered.tools:
        provider_types.check(fmt, declaration)


def test_models_read_the_ai_description_and_mcp_shows_the_display_name(shipped):
    """Every LLM format carries ai_description; MCP's title is the display name."""
    tool = shipped.get("square_root")
    ai = tool.definition.ai_description
    assert render_tool(tool, "openai").tools[0]["function"]["description"] == ai
    assert render_tool(tool, "openai-strict").tools[0]["function"]["description"] == ai
    assert render_tool(tool, "anthropic").tools[0]["description"] == ai
    assert render_tool(tool, "gemini").tools[0]["description"] == ai
    mcp_entry = render_tool(tool, "mcp").tools[0]
    assert (mcp_entry["description"], mcp_entry["title"]) == (ai, "Square root")


def test_a_listing_is_computed_once_per_catalog(shipped):
    """Rendering a format twice returns the same memoised object; formats are cached apart."""
    assert render(shipped, "gemini") is render(shipped, "gemini")
    assert render(shipped, "gemini") is not render(shipped, "anthropic")


def test_a_subset_reuses_the_per_tool_entries_in_the_given_order(shipped):
    """render_tools on a catalog's subset returns the same declaration objects as the full listing, in order."""
    full = {d["name"]: d for d in render(shipped, "anthropic").tools}
    subset = render_tools([shipped.get("sum"), shipped.get("get_time")], "anthropic")
    assert [d["name"] for d in subset.tools] == ["sum", "get_time"]
    assert subset.tools[0] is full["sum"] and subset.tools[1] is full["get_time"]


def test_an_unknown_format_is_a_bad_request(shipped):
    """A format name that does not exist is the caller's error (400), naming the formats there are."""
    with pytest.raises(BadRequest, match="unknown format 'claude'; use one of: openai, openai-strict"):
        render(shipped, "claude")


def test_an_unadaptable_tool_is_left_out_of_that_format_only(definitions_dir, recursive_schema, free_form_schema):
    """In a real catalog, a recursive tool is left out of gemini and a free-form one out of openai-strict, each
    with a diagnostic at its YAML position; every other tool and format keeps its full list."""
    directory = definitions_dir({
        "tree": recursive_schema,
        "tagger": free_form_schema,
        "plain": {"type": "object", "properties": {"q": {"type": "string"}}},
    })
    catalog = _catalog(directory)
    gemini = render(catalog, "gemini")
    assert [d["name"] for d in gemini.tools] == ["tagger", "plain"]
    [diagnostic] = gemini.diagnostics
    assert diagnostic.startswith("tools.yaml:") and "tool 'tree' left out of the gemini format" in diagnostic
    line = int(diagnostic.split(":")[1])
    assert "$ref" in (directory / "tools.yaml").read_text().splitlines()[line - 1]
    strict = render(catalog, "openai-strict")
    assert [d["function"]["name"] for d in strict.tools] == ["tree", "plain"]
    assert "tool 'tagger' left out of the openai-strict format" in strict.diagnostics[0]
    for fmt in ("openai", "anthropic", "mcp"):
        assert len(render(catalog, fmt).tools) == 3 and render(catalog, fmt).diagnostics == []


def test_a_renderer_that_fails_unexpectedly_costs_only_that_tool(shipped, monkeypatch):
    """A bug in one rendering becomes a diagnostic for that tool; the listing still holds the others."""
    real = FORMATS["openai"]

    def flaky(tool):
        if tool.id == "sum":
            raise KeyError("boom")
        return real(tool)

    monkeypatch.setitem(FORMATS, "openai", flaky)
    rendered = render_tools([tool for tool in _catalog(shipped.root).tools.values()], "openai")  # fresh, unmemoised
    assert "sum" not in [d["function"]["name"] for d in rendered.tools]
    assert len(rendered.tools) == len(shipped.tools) - 1
    assert "tool 'sum' left out of the openai format: internal error: KeyError" in rendered.diagnostics[0]


def test_a_reload_reuses_the_renderings_of_unchanged_tools(definitions_dir):
    """A catalog rebuilt from unchanged files (tools reused by the build cache) serves the same declarations."""
    directory = definitions_dir({"plain": {"type": "object", "properties": {"q": {"type": "string"}}}})
    settings = load_settings(None, environ={}, definitions=directory)
    loaded, built = DefinitionsCache(), BuildCache()
    first = build_catalog(load_definitions(directory, loaded), settings, cache=built)
    second = build_catalog(load_definitions(directory, loaded), settings, cache=built)
    assert render(first, "gemini") is not render(second, "gemini")
    assert render(first, "gemini").tools[0] is render(second, "gemini").tools[0]
