"""How search ranks, on catalogs built from YAML: a request that asks for several things finds each thing's tool;
a tool offered twice (one name, nearly one description) takes one place, the other folded into it as ``alike``
— never a tool the caller may not use; the same through REST and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import httpx
import pytest
from support import REPO, running

from gateway.catalog.build import build_catalog
from gateway.definitions.load import load_definitions
from gateway.search import index as search_index
from gateway.search.index import ToolIndex
from gateway.search.text import MAX_FIELD_CHARS, MAX_PARTS, query_parts
from gateway.settings import Settings, _api_key, hash_key

PARTS = """\
tools:
  - id: factorial
    name: Factorial
    user_description: n!
    ai_description: Calculates the factorial of a given number.
    binding: {python: "desk:echo"}
  - id: find_flute
    name: Find a flute
    user_description: Flutes for sale.
    ai_description: Finds a flute for sale, by its brand and features.
    binding: {python: "desk:echo"}
  - id: circle_area
    name: Circle area
    user_description: A circle's area.
    ai_description: Calculates the area of a circle of a given radius, for a number of circles.
    binding: {python: "desk:echo"}
  - id: body_mass_index
    name: Body mass index
    user_description: BMI.
    ai_description: Calculates the body mass index of a given weight and height, as a number.
    binding: {python: "desk:echo"}
""" + "".join(f"""\
  - id: find_{thing.replace(" ", "_")}
    name: Find a {thing}
    user_description: For sale.
    ai_description: Finds a {thing} for sale near you, by its brand, and calculates its price.
    binding: {{python: "desk:echo"}}
""" for thing in ("house", "car", "bike", "flute player", "flute teacher"))
TWICE = """\
tools:
  - id: web_search
    name: Web search
    user_description: Searches the web.
    ai_description: Searches the web for pages about a topic.
    binding: {python: "desk:echo"}
    input_schema: {type: object, properties: {topic: {type: string}}}
    toolsets: [web]
  - id: web_search_mirror
    name: web search
    user_description: Searches the web.
    ai_description: Searches the web for pages about a topic, in any language.
    binding: {python: "desk:echo"}
    input_schema: {type: object, properties: {topic: {type: string}}}
    toolsets: [mirror]
  - id: news_search
    name: Web search
    user_description: Searches the news.
    ai_description: Finds the articles published today in the press, on a web page or a topic.
    binding: {python: "desk:echo"}
    input_schema: {type: object, properties: {topic: {type: string}}}
    toolsets: [web]
"""
CODE = "def echo(**arguments) -> dict:\n    return arguments\n"
MANY_PARTS = ("Please calculate the factorial of 7, a given number, and calculate it as a number of a given size. "
              "Then find a flute for sale.")


def _index(write_definitions, tools: str) -> ToolIndex:
    root = write_definitions({"desk.yaml": tools, "python/desk.py": CODE})
    catalog = build_catalog(load_definitions(root), Settings(definitions=root, reload=False))
    return ToolIndex(list(catalog.tools.values()))


def _ids(index: ToolIndex, query: str, k: int) -> list[str]:
    return [hit.tool.id for hit in index.search(query, k, "all", lambda tool: True)]


@pytest.mark.parametrize(("text", "parts"), [
    ("What is the weather in Paris?", 0),
    ("Weather in Paris. Time in Tokyo? Stock price of Contoso!", 3),
    ("Compute the factorial of 7, then find me a flute; lastly the allele frequency", 3),
    ("First the weather in Paris\nand after that the time in Tokyo", 2),
    ("Weather. Paris", 0),  # a part of one term says too little to search on its own
    ("Weather in Paris. " * 1_000, MAX_PARTS),  # the last parts only: what is asked now
    (". " * 20_000 + "\n" * 20_000, 0),
])
def test_a_request_is_read_as_the_parts_it_asks_for(text, parts):
    assert len(query_parts(text)) == parts


def test_each_part_of_a_request_finds_its_tool(write_definitions, monkeypatch):
    """Taken whole, the request's many words of calculation put every calculator before the flute; read as its
    parts, each part's tool comes first: the factorial and the flute."""
    index = _index(write_definitions, PARTS)
    assert set(_ids(index, MANY_PARTS, 2)) == {"factorial", "find_flute"}
    monkeypatch.setattr(search_index, "query_parts", lambda text: [])
    assert _ids(index, MANY_PARTS, 3) == ["factorial", "circle_area", "body_mass_index"]  # the request taken whole


def test_a_tool_offered_twice_takes_one_place(write_definitions):
    """web_search_mirror is web_search again (one name, case aside; nearly one description): it is folded into
    web_search, which leaves the second place to news_search — named alike but saying something else."""
    index = _index(write_definitions, TWICE)
    found = index.search("search the web for pages about otters", 2, "all", lambda tool: True)
    assert [hit.tool.id for hit in found] == ["web_search", "news_search"]
    assert [tool.id for tool in found[0].alike] == ["web_search_mirror"] and found[1].alike == ()
    assert found[0].entry()["alike"] == ["web_search_mirror"] and "alike" not in found[1].entry()


def test_tools_of_one_name_that_say_nothing_are_not_folded(write_definitions):
    silent = "tools:\n" + "".join(f"""\
  - id: lookup_{n}
    name: Lookup
    user_description: Looks up.
    ai_description: "-"
    binding: {{python: "desk:echo"}}
    input_schema: {{type: object, properties: {{record: {{type: string}}}}}}
""" for n in (1, 2))
    found = _index(write_definitions, silent).search("look up a record", 2, "all", lambda tool: True)
    assert [(hit.tool.id, hit.alike) for hit in found] == [("lookup_1", ()), ("lookup_2", ())]


def test_rest_and_the_cli_show_what_was_folded_and_only_what_the_caller_may_use(write_definitions):
    definitions = write_definitions({"desk.yaml": TWICE, "python/desk.py": CODE})
    keys = (_api_key({"name": "all", "sha256": hash_key("all-key")}),
            _api_key({"name": "web", "sha256": hash_key("web-key"), "toolsets": ["web"]}))
    query = {"q": "search the web for pages about otters", "k": 3}
    with running(definitions, api_keys=keys) as served:
        everyone = httpx.get(f"{served.url}/tools/search", params=query, timeout=20,
                             headers={"Authorization": "Bearer all-key"}).json()["tools"]
        web = httpx.get(f"{served.url}/tools/search", params=query, timeout=20,
                        headers={"Authorization": "Bearer web-key"}).json()["tools"]
    assert [(tool["id"], tool.get("alike")) for tool in everyone] == [("web_search", ["web_search_mirror"]),
                                                                       ("news_search", None)]
    assert "web_search_mirror" not in json.dumps(web)  # not the web key's: neither found nor named
    assert [tool["id"] for tool in web] == ["web_search", "news_search"]
    run = subprocess.run([sys.executable, "-m", "gateway", "search", str(definitions), query["q"]],
                         capture_output=True, text=True, cwd=REPO, timeout=60, check=False)
    assert run.returncode == 0, run.stderr
    assert "web_search" in run.stdout.splitlines()[0] and "(alike: web_search_mirror)" in run.stdout


def test_a_catalog_of_one_tool_offered_many_times_is_searched_in_bounded_time(write_definitions):
    """3,000 copies of one tool: each search folds the candidates it reads (a few times k), not the catalog."""
    copies = "\n".join(f"""\
  - id: copy_{n}
    name: Web search
    user_description: Searches.
    ai_description: Searches the web for pages about a topic, copy {n}.
    binding: {{python: "desk:echo"}}""" for n in range(3_000))
    index = _index(write_definitions, "tools:\n" + copies)
    found = index.search("web pages about otters", 50, "all", lambda tool: True)
    assert len(found) == 1 and 50 <= len(found[0].alike) < 3_000



VALUES = """\
tools:
  - id: find_movies
    name: Find movies
    user_description: Films showing.
    ai_description: Finds the films showing at a theater.
    binding: {python: "desk:echo"}
    input_schema:
      type: object
      properties:
        show_type: {type: string, enum: [regular, 3d, imax]}
        genres: {type: array, items: {type: string, enum: [drama, comedy]}}
  - id: list_movies
    name: List movies
    user_description: Films showing.
    ai_description: Lists the films showing at a theater, with their times, their seats left and their prices.
    binding: {python: "desk:echo"}
    input_schema: {type: object, properties: {theater: {type: string, default: downtown}}}
"""


@pytest.mark.parametrize(("query", "first"), [
    ("an imax film tonight", "find_movies"),  # an enum's value
    ("a comedy film tonight", "find_movies"),  # the enum of an array's items
    ("films showing downtown", "list_movies"),  # a default
])
def test_a_tool_is_found_by_the_values_its_parameters_take(write_definitions, query, first):
    """Nothing but a parameter's accepted values names what the request asks for ("IMAX", "comedy")."""
    assert _ids(_index(write_definitions, VALUES), query, 2)[0] == first


def test_a_parameter_of_endless_values_is_read_as_far_as_one_field(write_definitions):
    """An enum of 100,000 values costs the index one field's worth of terms (MAX_FIELD_CHARS of text), not all."""
    values = ", ".join(f"value{n}" for n in range(100_000))
    tools = VALUES + f"""\
  - id: endless
    name: Endless
    user_description: Many values.
    ai_description: Takes a value.
    binding: {{python: "desk:echo"}}
    input_schema: {{type: object, properties: {{choice: {{type: string, enum: [{values}]}}}}}}
"""
    index = _index(write_definitions, tools)
    endless = next(tool for tool in index.tools if tool.id == "endless")
    assert search_index._postings(endless).shape[1] < MAX_FIELD_CHARS // 4
    assert _ids(index, "700", 1) == ["endless"] and _ids(index, "99999", 1) == []  # read, and not read
