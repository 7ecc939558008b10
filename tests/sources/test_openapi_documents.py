"""OpenAPI documents: problems located in the document, URL documents kept on disk and served stale, reloads
that reuse what did not change, and `tool-gateway import openapi` writing definitions that serve the same tools."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from openapi_apis import PETSTORE, TRACKER
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import Route
from support import NODE_MODULES, needs_node_modules, serving

from gateway.catalog.build import build_catalog
from gateway.cli.main import main
from gateway.definitions.load import load_definitions
from gateway.errors import DefinitionsInvalid
from gateway.settings import Settings

REAL_WORLD = NODE_MODULES / "@octokit/openapi/generated/api.github.com.json"

BROKEN = """\
openapi: 3.0.3
info: {title: broken, version: "1"}
servers: [{url: /relative}]
paths:
  /things/{id}:
    get:
      operationId: getThing
      responses: {"200": {description: ok}}
  /other:
    post:
      operationId: postOther
      requestBody:
        content:
          application/json:
            schema: {$ref: "other.yaml#/Thing"}
      responses: {"200": {description: ok}}
"""


def _build(root: Path, **settings):
    return build_catalog(load_definitions(root), Settings(definitions=root, **settings))


def test_problems_in_the_document_point_at_its_lines(write_definitions):
    """A relative server URL, an undeclared path parameter and an external $ref are reported at file:line."""
    root = write_definitions({"specs/broken.yaml": BROKEN, "api.yaml": """
        sources:
          - id: broken
            openapi: {spec: specs/broken.yaml}
    """})
    with pytest.raises(DefinitionsInvalid) as caught:
        _build(root)
    shown = [str(p) for p in caught.value.problems]
    assert any(s.startswith("specs/broken.yaml:3:") and "not absolute: give the source's `server_url`" in s
               for s in shown), shown
    root_fixed = write_definitions({"specs/broken.yaml": BROKEN, "api.yaml": """
        sources:
          - id: broken
            openapi: {spec: specs/broken.yaml, server_url: "http://127.0.0.1:9"}
    """}, directory="fixed")
    with pytest.raises(DefinitionsInvalid) as caught:
        _build(root_fixed)
    [error] = caught.value.problems
    assert str(error).startswith("specs/broken.yaml:15:28: #/paths/~1other/post/requestBody/content/"
                                 "application~1json/schema/$ref: $ref 'other.yaml#/Thing' points outside")


def test_an_undeclared_path_parameter_leaves_the_operation_out_with_a_warning(write_definitions):
    """An operation whose path names a parameter it does not declare is not served, and the warning says where."""
    root = write_definitions({"specs/api.yaml": BROKEN.replace('{$ref: "other.yaml#/Thing"}', "{type: object}"),
                              "api.yaml": """
        sources:
          - id: broken
            openapi: {spec: specs/broken.yaml, server_url: "http://127.0.0.1:9"}
    """.replace("broken.yaml", "api.yaml")})
    catalog = _build(root)
    assert sorted(catalog.tools) == ["postOther"]
    [warning] = [w for w in catalog.warnings if "getThing" in w.message or "/things" in w.message]
    assert (warning.file, warning.line) == ("specs/api.yaml", 7) and "path parameter(s) id" in warning.message


def test_a_document_no_source_names_is_a_warning_not_a_definitions_error(write_definitions):
    """An OpenAPI YAML file in the definitions directory is not read as definitions; unnamed, it is a warning."""
    root = write_definitions({"specs/pets.yaml": PETSTORE, "tools.yaml": """
        tools:
          - {id: t, name: t, user_description: t, ai_description: t, binding: {http: {url: "http://127.0.0.1:9/"}}}
    """})
    catalog = _build(root)
    assert list(catalog.tools) == ["t"]
    assert any(w.file == "specs/pets.yaml" and "no source names it" in w.message for w in catalog.warnings)


class DocumentServer:
    """Serves the tracker document at /openapi.json while ``up``; answers 503 otherwise."""

    def __init__(self, text: str):
        self.text, self.up, self.fetches = text, True, 0

    async def document(self, request):
        self.fetches += 1
        if not self.up:
            return Response("down for maintenance", status_code=503)
        return Response(self.text, media_type="application/json")

    def app(self):
        return Starlette(routes=[Route("/openapi.json", self.document)])


def _list(root: Path, state: Path, *options: str) -> subprocess.CompletedProcess:
    environment = {**os.environ, "TOOL_GATEWAY_STATE_DIR": str(state)}
    return subprocess.run([sys.executable, "-m", "gateway", "list", str(root), *options], capture_output=True,
                          text=True, timeout=60, env=environment, check=False)


def test_a_url_document_down_at_start_is_served_stale_from_disk(tmp_path):
    """Fetched once, the document is kept on disk; a new process that cannot fetch it serves its tools, stale."""
    documents = DocumentServer(json.dumps(TRACKER).replace('"PORT"', '"9"'))
    root = tmp_path / "defs"
    root.mkdir()
    state = tmp_path / "state"
    with serving(documents.app()) as server:
        (root / "api.yaml").write_text(textwrap.dedent(f"""
            sources:
              - id: tracker
                openapi: {{url: "{server.url}/openapi.json"}}
                include: ["issues/update"]
                tools: {{issues/update: {{id: update_issue}}}}
        """), encoding="utf-8")
        fresh = _list(root, state)
        assert fresh.returncode == 0, fresh.stderr
        assert "update_issue" in fresh.stdout and "source tracker  openapi  1 tool(s)  ok" in fresh.stdout
        documents.up = False
        stale = _list(root, state)
        assert documents.fetches == 2
    assert stale.returncode == 0, stale.stderr
    assert "update_issue" in stale.stdout
    assert "source tracker  openapi  1 tool(s)  stale" in stale.stdout and "HTTP 503" in stale.stdout
    gone = _list(root, tmp_path / "empty-state", "--json")  # never fetched, server gone: no tools, still serves
    assert gone.returncode == 0
    [source] = json.loads(gone.stdout)["sources"]
    assert (source["id"], source["tools"], source["health"]) == ("tracker", 0, "down")


def test_a_reload_reuses_the_tools_of_an_unchanged_document_and_sees_a_changed_one(write_definitions):
    """Same bytes: the same catalog; one operation edited: that tool is new, the others are the same built tools."""
    from gateway.runtime.gateway import Gateway

    spec = PETSTORE.replace("BASE", "http://127.0.0.1:9")
    root = write_definitions({"specs/pets.yaml": spec, "api.yaml": """
        sources:
          - id: pets
            openapi: {spec: specs/pets.yaml}
    """})
    gateway = Gateway(Settings(definitions=root, reload=False))
    before = gateway.catalog
    import asyncio

    asyncio.run(gateway.reload())
    assert gateway.catalog is before  # nothing changed: no new catalog
    (root / "specs/pets.yaml").write_text(spec.replace("List all pets", "List every pet"), encoding="utf-8")
    outcome = asyncio.run(gateway.reload())
    assert outcome.changed and gateway.catalog.tools["listPets"].definition.name == "List every pet"
    assert gateway.catalog.tools["showPetById"] is before.tools["showPetById"]


def _comparable(catalog) -> dict:
    return {tool.id: (tool.input_schema, dict(tool.definition.binding), tool.definition.ai_description,
                      dict(tool.definition.annotations)) for tool in catalog.tools.values()}


def test_import_writes_definitions_that_validate_and_serve_the_same_tools(write_definitions, capsys, tmp_path):
    """`import openapi` output is ordinary YAML that validates and serves what the source serves."""
    spec = PETSTORE.replace("BASE", "http://127.0.0.1:9")
    root = write_definitions({"specs/pets.yaml": spec, "api.yaml": """
        sources:
          - id: pets
            openapi: {spec: specs/pets.yaml, security: {api_key: "{{ secrets.PET_KEY }}"}}
            prefix: p_
            exclude: ["delete*"]
    """})
    out = tmp_path / "imported" / "pets.yaml"
    out.parent.mkdir()
    code = main(["import", "openapi", str(root / "specs/pets.yaml"), "--prefix", "p_", "--exclude", "delete*",
                 "--security", "api_key={{ secrets.PET_KEY }}", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    assert main(["validate", str(out.parent)]) == 0
    assert _comparable(_build(out.parent)) == _comparable(_build(root))


@needs_node_modules("@octokit/openapi/generated/api.github.com.json")
def test_githubs_published_document_converts_in_place(tmp_path, capsys):
    """GitHub's real OpenAPI 3.0 document (13 MB, ~1,200 operations) imports, and the output validates."""
    out = tmp_path / "github" / "github.yaml"
    out.parent.mkdir()
    settings = tmp_path / "settings.yaml"
    settings.write_text("max_file_bytes: 64000000\nmax_yaml_nodes: 20000000\n", encoding="utf-8")
    assert main(["--settings", str(settings), "import", "openapi", str(REAL_WORLD), "--include", "issues/*",
                 "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "written as 'issues_create'" in err
    catalog = _build(out.parent)
    assert len(catalog.tools) > 40 and "issues_create" in catalog.tools
    create = catalog.tools["issues_create"]
    assert create.definition.binding["http"]["url"] == ("https://api.github.com/repos/{{ args.owner }}/"
                                                        "{{ args.repo }}/issues")
    assert {"owner", "repo", "title"} <= set(create.input_schema["required"])


def _paths(node, path=()):
    yield path
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        yield from _paths(child, (*path, key))


def test_a_document_written_wrong_anywhere_never_crashes_the_conversion():
    """Nodes replaced by values of the wrong type (or dangling $refs) are problems or ignored, never an exception."""
    import copy
    import random

    import yaml

    from gateway.sources.openapi_operations import Operations

    wrong = [None, 5, "x", [], {}, [1], {"$ref": "#/nope"}, {"$ref": "#/components"}, True, {"type": 3}, {"$ref": 5}]
    documents = [yaml.safe_load(PETSTORE.replace("BASE", "http://h")), TRACKER]
    rng = random.Random(15)
    for _ in range(600):
        document = copy.deepcopy(rng.choice(documents))
        for _ in range(rng.randint(1, 3)):
            *parent_path, last = rng.choice([p for p in _paths(document) if p])
            parent = document
            for step in parent_path:
                parent = parent[step]
            parent[last] = copy.deepcopy(rng.choice(wrong))
        document = json.loads(json.dumps(document))  # keys as the loader leaves them: strings
        operations = Operations(document, security={"api_key": "k", "basic": "a:b"}, server_url=None,
                                document_url="http://h/openapi.json")
        operations.tools()  # raises on a crash
