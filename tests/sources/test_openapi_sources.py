"""The `sources:` framework with a stand-in kind: selection, ids, overrides, hidden arguments, status, staleness."""

from __future__ import annotations

import threading

import pytest

from gateway.catalog.build import build_catalog
from gateway.context import CallContext
from gateway.definitions.load import load_definitions
from gateway.errors import DefinitionsInvalid
from gateway.invoke import invoke
from gateway.settings import Settings
from gateway.sources.expansion import SOURCE_KINDS, Expansion, UpstreamTool

ECHO = {"python": "echo:run"}
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}, "tenant": {"type": "string"},
                                           "user_id": {"type": "string"}},
          "required": ["q", "tenant", "user_id"], "additionalProperties": False}
UPSTREAM = {
    "getPet": UpstreamTool("getPet", "Get a pet", "Returns one pet by id.", SCHEMA, ECHO,
                           annotations={"read_only": True}),
    "listPets": UpstreamTool("listPets", "", "Lists pets.", SCHEMA, ECHO),
    "listOwners": UpstreamTool("listOwners", "", "Lists owners.", SCHEMA, ECHO),
    "deletePet": UpstreamTool("deletePet", "", "Deletes a pet.", SCHEMA, ECHO),
    "x" * 70: UpstreamTool("x" * 70, "", "A long name.", SCHEMA, ECHO),
}
behaviour = {"fail": False, "block": None}


def expand(declaration, env):
    """The stand-in kind: the tools above; fails or blocks when a test says so."""
    if behaviour["block"] is not None:
        behaviour["block"].wait(10)
    if behaviour["fail"]:
        raise ConnectionError("upstream down")
    return Expansion(tuple(UPSTREAM.values()), (), {"health": "ok", "last_refresh": 1.0})


@pytest.fixture(autouse=True)
def stand_in_kind(monkeypatch):
    monkeypatch.setitem(SOURCE_KINDS, "openapi", __name__)
    behaviour.update(fail=False, block=None)


def _catalog(write_definitions, source: str, **settings):
    root = write_definitions({"python/echo.py": "def run(**kwargs):\n    return kwargs\n", "api.yaml": source})
    return build_catalog(load_definitions(root), Settings(definitions=root, **settings))


SOURCE = """
    sources:
      - id: pets
        openapi: {spec: pets.json}
        include: [getPet, "list*"]
        exclude: [listOwners]
        prefix: pet_
        toolsets: [animals]
        tools:
          getPet: {toolsets: [reading], ai_description: Fetch one pet.}
        hidden:
          getPet: {tenant: acme, user_id: {context: user}}
          listPets: {tenant: acme, user_id: {context: user}}
"""


def test_include_exclude_prefix_and_overrides_make_the_ids_and_fields(write_definitions):
    """Include/exclude select upstream names (globs too), the prefix makes ids, overrides and defaults apply."""
    catalog = _catalog(write_definitions, SOURCE)
    assert sorted(catalog.tools) == ["pet_getPet", "pet_listPets"]
    get = catalog.tools["pet_getPet"].definition
    assert get.toolsets == ("reading",) and get.ai_description == "Fetch one pet." and get.name == "Get a pet"
    assert get.annotations == {"read_only": True}
    assert catalog.tools["pet_listPets"].definition.toolsets == ("animals",)
    wanted = {"id": "pets", "kind": "openapi", "tools": 2, "health": "ok", "stale": False}
    assert wanted.items() <= catalog.sources[0].items()


async def test_hidden_arguments_leave_the_schema_and_are_filled_at_call_time(write_definitions):
    """Hidden parameters are not in the served schema; a call gets the fixed value and the caller's user."""
    catalog = _catalog(write_definitions, SOURCE)
    schema = catalog.tools["pet_getPet"].input_schema
    assert set(schema["properties"]) == {"q"} and schema["required"] == ["q"]
    result = await invoke(catalog, "pet_getPet", {"q": "rex"}, CallContext(user="alice"))
    assert result.value == {"q": "rex", "tenant": "acme", "user_id": "alice"}
    smuggled = await invoke(catalog, "pet_getPet", {"q": "rex", "tenant": "evil"}, CallContext(user="alice"))
    assert smuggled.is_error  # the schema is closed: a hidden parameter is not the LLM's to give
    anonymous = await invoke(catalog, "pet_getPet", {"q": "rex"}, CallContext())
    assert anonymous.is_error and "user" in anonymous.text


def test_an_id_past_64_characters_is_a_problem_with_a_suggested_fix(write_definitions):
    """A generated id longer than 64 characters is reported with a `tools: {name: {id: ...}}` fix, not cut."""
    with pytest.raises(DefinitionsInvalid) as caught:
        _catalog(write_definitions, "sources:\n  - id: pets\n    openapi: {spec: pets.json}\n")
    [problem] = [p for p in caught.value.problems if "70 characters" in p.message]
    assert problem.file == "api.yaml" and problem.line == 3
    assert f"tools: {{{'x' * 70}: {{id: " in problem.message


def test_a_fixed_id_for_the_long_name_and_a_collision_with_a_written_tool(write_definitions):
    """An `id` override fixes a long name; a generated id that a written tool has is a problem at the source."""
    source = f"""
        tools:
          - id: listPets
            name: mine
            user_description: mine
            ai_description: mine
            binding: {{python: "echo:run"}}
        sources:
          - id: pets
            openapi: {{spec: pets.json}}
            tools:
              {'x' * 70}: {{id: long_one}}
    """
    with pytest.raises(DefinitionsInvalid) as caught:
        _catalog(write_definitions, source)
    [problem] = caught.value.problems
    assert "tool id 'listPets' is already declared by api.yaml:2:" in problem.message
    assert "tools: {listPets: {id: ...}}" in problem.message


def test_unknown_names_and_bad_hidden_parameters_are_reported(write_definitions):
    """A typo in include/tools is a warning with a close match; a hidden parameter the tool lacks is an error."""
    source = """
        sources:
          - id: pets
            openapi: {spec: pets.json}
            include: [getPett, getPet]
            hidden:
              getPet: {owner: 1}
    """
    with pytest.raises(DefinitionsInvalid) as caught:
        _catalog(write_definitions, source)
    [error] = caught.value.problems
    assert "has no parameter 'owner'" in error.message and error.line == 6
    warnings = _catalog(write_definitions, source.replace("{owner: 1}", "{tenant: acme}")).warnings
    assert any("did you mean getPet" in w.message for w in warnings)


def test_a_failing_kind_serves_its_last_expansion_marked_stale(write_definitions):
    """When the kind raises, the last expansion of the same declaration is served, stale, with the reason."""
    fresh = _catalog(write_definitions, SOURCE)
    behaviour["fail"] = True
    stale = _catalog(write_definitions, SOURCE)
    assert sorted(stale.tools) == sorted(fresh.tools)
    assert stale.sources[0]["stale"] is True and "upstream down" in stale.sources[0]["error"]
    assert stale.version != fresh.version  # /status must see the change of health


def test_a_kind_that_never_answers_does_not_hold_the_build(write_definitions, monkeypatch):
    """A kind blocked past the build's wait for sources: the build ends, the source is down, with a warning."""
    monkeypatch.setattr("gateway.catalog.build.SOURCES_WAIT_S", 0.2)
    behaviour["block"] = threading.Event()
    try:
        catalog = _catalog(write_definitions, SOURCE.replace("pets.json", "other.json"))
    finally:
        behaviour["block"].set()
    assert not catalog.tools and catalog.sources[0]["health"] == "down"
    assert any("not read within" in w.message for w in catalog.warnings)


def test_two_sources_generating_one_id_is_a_problem_naming_both(write_definitions):
    """The second source whose tool takes an id the first already generated gets the problem, and a fix."""
    source = """
        sources:
          - id: first
            openapi: {spec: a.json}
            include: [getPet]
          - id: second
            openapi: {spec: b.json}
            include: [getPet]
    """
    with pytest.raises(DefinitionsInvalid) as caught:
        _catalog(write_definitions, source)
    [problem] = caught.value.problems
    assert problem.line == 5 and problem.message.startswith("source 'second': tool id 'getPet' is already declared "
                                                            "by source 'first' (api.yaml:2:")
    assert "add `tools: {getPet: {id: ...}}` to the source" in problem.message


def test_a_misshapen_source_is_reported_not_expanded(write_definitions):
    """A source the schema rejects (`include: 5`) is a problem at its key; it is not expanded (no crash)."""
    with pytest.raises(DefinitionsInvalid) as caught:
        _catalog(write_definitions, "sources:\n  - id: pets\n    openapi: {spec: a.json}\n    include: 5\n")
    [problem] = caught.value.problems
    assert (problem.line, problem.message) == (4, "sources[0].include: expected array, got integer")
