"""Build time of an ``openapi:`` source of 500 operations against plain YAML loading of the same document.

    python bench/bench_openapi.py [--operations 500] [--rounds 5]

The document is generated in the shape of real APIs: 100 paths of 5 operations each, path/query/header
parameters, JSON bodies that refer to shared schemas (allOf, oneOf, a circular tree), an API key. Each round runs
in a fresh process (so that no cache of an earlier round helps: a start-up), timed in process CPU time; the best
round of each is reported, so that other load on the machine weighs on them alike:

- ``yaml load``: the gateway's bounded YAML loader (``parse_yaml``) on the document's text: the floor;
- ``cold build``: ``build_catalog`` of a definitions directory holding the source: read, convert, generate,
  check and build 500 http tools;
- ``as YAML``: ``build_catalog`` of the same 500 tools written out by ``tool-gateway import openapi``: what the
  http binding costs without the conversion;
- ``reload``: the source's build again in the same process with its caches (nothing changed).

Target: cold build < 1 s.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from gateway.catalog.build import build_catalog
from gateway.catalog.cache import BuildCache
from gateway.definitions.load import DefinitionsCache, load_definitions
from gateway.definitions.yamlbudget import YamlLimits
from gateway.definitions.yamlsource import parse_yaml
from gateway.settings import Settings
from gateway.sources.openapi_import import import_openapi

SCHEMAS: dict[str, Any] = {
    "Base": {"type": "object", "properties": {"name": {"type": "string"}, "note": {"type": "string",
                                                                               "nullable": True}}},
    "Item": {"allOf": [{"$ref": "#/components/schemas/Base"},
                       {"type": "object", "properties": {"size": {"type": "integer", "minimum": 0}}}]},
    "Node": {"type": "object", "properties": {"value": {"type": "string"},
                                              "children": {"type": "array",
                                                           "items": {"$ref": "#/components/schemas/Node"}}}},
    "Choice": {"oneOf": [{"$ref": "#/components/schemas/Item"}, {"$ref": "#/components/schemas/Node"}]},
}


def document(operations: int) -> str:
    paths: dict[str, Any] = {}
    for index in range(operations // 5):
        common = [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}},
                  {"name": "X-Trace", "in": "header", "schema": {"type": "string"}}]
        query = [{"name": "limit", "in": "query", "schema": {"type": "integer", "maximum": 100}},
                 {"name": "tags", "in": "query", "schema": {"type": "array", "items": {"type": "string"}}}]
        body = {"required": True, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Item"}}}}
        tree = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Choice"}}}}
        paths[f"/things{index}/{{id}}"] = {
            "parameters": common,
            "get": {"operationId": f"getThing{index}", "summary": f"Get thing {index}", "parameters": query},
            "put": {"operationId": f"putThing{index}", "summary": f"Replace thing {index}", "requestBody": body},
            "patch": {"operationId": f"patchThing{index}", "requestBody": tree},
            "delete": {"operationId": f"deleteThing{index}", "description": "Deletes it."},
            "post": {"operationId": f"nodeThing{index}", "requestBody": {"required": True, "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/Node"}}}}},
        }
    return yaml.safe_dump({"openapi": "3.0.3", "info": {"title": "bench", "version": "1"},
                           "servers": [{"url": "http://127.0.0.1:9/api"}], "security": [{"key": []}],
                           "paths": paths, "components": {"schemas": SCHEMAS, "securitySchemes": {
                               "key": {"type": "apiKey", "in": "header", "name": "X-Key"}}}}, sort_keys=False)


def child(root: Path, imported: Path) -> None:
    """One round, in this fresh process: prints the seconds of each measure as JSON."""
    settings = Settings(definitions=root)
    text = (root / "api.yaml").read_text(encoding="utf-8")
    timings = {}
    started = time.process_time()
    parse_yaml("api.yaml", text, YamlLimits.from_settings(settings))
    timings["yaml load"] = time.process_time() - started
    definitions_cache, build_cache = DefinitionsCache(), BuildCache()
    started = time.process_time()
    catalog = build_catalog(load_definitions(root, definitions_cache), settings, cache=build_cache)
    timings["cold build"] = time.process_time() - started
    started = time.process_time()
    build_catalog(load_definitions(imported), Settings(definitions=imported))
    timings["as YAML"] = time.process_time() - started
    started = time.process_time()
    build_catalog(load_definitions(root, definitions_cache), settings, cache=build_cache)
    timings["reload"] = time.process_time() - started
    print(json.dumps({"tools": len(catalog.tools), **timings}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--operations", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), Path(args.child[1]))
        return
    text = document(args.operations)
    with tempfile.TemporaryDirectory() as directory:
        root, imported = Path(directory, "source"), Path(directory, "imported")
        root.mkdir()
        imported.mkdir()
        (root / "api.yaml").write_text(text, encoding="utf-8")
        (root / "sources.yaml").write_text(
            "sources:\n  - id: bench\n    openapi: {spec: api.yaml, security: {key: 'x'}}\n", encoding="utf-8")
        written = import_openapi(str(root / "api.yaml"), Settings(), security={"key": "x"})
        (imported / "api.yaml").write_text(written.text, encoding="utf-8")
        best: dict[str, float] = {}
        tools = 0
        for _ in range(args.rounds):
            output = subprocess.run([sys.executable, __file__, "--child", str(root), str(imported)], check=True,
                                    capture_output=True, text=True).stdout
            measured = json.loads(output.strip().splitlines()[-1])
            tools = measured.pop("tools")
            best = {k: min(v, best.get(k, float("inf"))) for k, v in measured.items()}
    print(f"{args.operations} operations, {len(text):,} bytes of YAML, {tools} tools; best of {args.rounds} "
          "rounds, each in a fresh process (process CPU time)")
    for label, seconds in best.items():
        print(f"  {label:<11} {seconds * 1000:8.1f} ms")


if __name__ == "__main__":
    main()
