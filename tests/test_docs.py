"""Meta-tests of the documentation: every YAML key, binding key, setting and endpoint is documented in docs/ (the
site `mkdocs build` makes); README stays short and holds both set-up commands; the site builds in strict mode."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
from support import EXAMPLES, REPO

from gateway.settings import Settings

DOCS = REPO / "docs"
PAGES = {path.name: path.read_text(encoding="utf-8") for path in sorted(DOCS.glob("*.md"))}
TEXT = "\n".join(PAGES.values())
README = (REPO / "README.md").read_text(encoding="utf-8")
SCHEMAS = REPO / "schemas"
TOOL_KEYS = sorted(json.loads((SCHEMAS / "tool-definitions.schema.json").read_text())["$defs"]["tool"]["properties"])
HTTP_KEYS = sorted(json.loads((SCHEMAS / "bindings" / "http.schema.json").read_text())["properties"])
README_MAX_LINES = 250


def test_the_docs_have_their_pages():
    """The pages exist and are not empty, so the meta-tests below cannot pass on an empty directory."""
    assert {"index.md", "tools.md", "settings.md", "serving.md", "architecture.md"} <= PAGES.keys()
    assert all(text.strip() for text in PAGES.values())


@pytest.mark.parametrize("key", TOOL_KEYS)
def test_every_tool_key_is_documented(key):
    """Each key of a tool definition in the published schema has a line in docs/."""
    assert f"`{key}`" in TEXT or f"`binding.{key}" in TEXT


@pytest.mark.parametrize("key", HTTP_KEYS)
def test_every_http_binding_key_is_documented(key):
    """Each key of the http binding's schema is named in docs/."""
    assert f"`{key}`" in TEXT


@pytest.mark.parametrize("name", [f.name for f in fields(Settings)])
def test_every_setting_is_documented(name):
    """Each server setting has a row in docs/settings.md's table."""
    assert f"`{name}`" in PAGES["settings.md"]


def _routes(routes, prefix=""):
    """(path, methods) of every route of the app, mounted ones under their mount's path."""
    for route in routes:
        if hasattr(route, "routes") and not hasattr(route, "methods"):
            yield from _routes(route.routes, prefix + route.path)
        else:
            yield prefix + route.path, set(getattr(route, "methods", None) or ()) - {"HEAD"}


def _any_parameter(text: str) -> str:
    """A path with each parameter written alike: `/tools/{tool_id}` and `/tools/{id}` are one endpoint."""
    return re.sub(r"\{[^{}]*\}", "{}", text)


def test_every_endpoint_is_documented():
    """Each route the app serves is named in docs/ as `METHOD /path` (a parameter under any name); a GET route, a
    WebSocket or an ASGI mount (MCP) may be named by its path alone. The console's API is documented relative to
    `/admin/api/` (`GET tools/{id}`), as its table writes it."""
    from gateway.server.app import create_app

    spans = {_any_parameter(span) for span in re.findall(r"`([^`\n]+)`", TEXT)}
    missing = []
    for path, methods in _routes(create_app(Settings(definitions=EXAMPLES)).routes):
        path = _any_parameter(path)
        names = {path}
        if path.startswith("/admin/api/"):
            names.add(path.removeprefix("/admin/api/"))
        for method in methods or {"GET"}:
            said = {f"{method} {name}" for name in names}
            if not methods or method == "GET":
                said |= names
            if not said & spans:
                missing.append(f"{method} {path}" if methods else path)
    assert not missing, f"endpoints not documented in docs/: {missing}"


def _command_after(comment: str) -> str:
    """The line after README's comment line, as .ci/run reads command 2 (`grep -A1 '^# 2. run the tests'`)."""
    lines = README.splitlines()
    found = [i for i, line in enumerate(lines) if line.startswith(comment)]
    assert len(found) == 1, f"README.md has {len(found)} lines starting with {comment!r}"
    return lines[found[0] + 1]


def test_the_readme_is_short_and_holds_both_commands():
    """README is a front page (at most 250 lines) with the two set-up commands at the top: the gateway on the
    shipped tools, and the test command CI runs, which builds the docs strictly before the tests."""
    assert len(README.splitlines()) <= README_MAX_LINES
    serve = _command_after("# 1. run the gateway")
    assert serve == "pip install -c deploy/constraints.txt -e . && tool-gateway serve tool-definitions"
    test = _command_after("# 2. run the tests")
    assert "pip install -q -c deploy/constraints.txt -e '.[test,docs]'" in test
    assert test.endswith(" && mkdocs build --strict && python -m pytest")
    assert README.index("# 1. run the gateway") < README.index("# 2. run the tests") < README.index("\n## ")


def test_the_readme_links_pages_that_exist():
    """Every docs/ page README links to exists (mkdocs checks the links between pages, not README's)."""
    linked = re.findall(r"\]\(docs/([^)#]+)(?:#[^)]*)?\)", README)
    assert linked
    assert not [page for page in linked if page not in PAGES]


def test_the_readme_dependency_tables_are_the_docs_pages():
    """README says why each dependency is there; its tables are docs/dependencies.md's, row for row."""
    section = README[README.index("\n## Dependencies"):]
    rows = [line.replace("](docs/", "](") for line in section.splitlines() if line.startswith("| `")]
    assert len(rows) >= 10
    assert not [row for row in rows if row not in PAGES["dependencies.md"].splitlines()]


def test_the_site_builds_strictly(tmp_path: Path):
    """`mkdocs build --strict` passes: no warning, no broken link or anchor between pages (mkdocs.yml's
    `validation`), every page in the nav. README's links into docs/ name anchors the built pages have."""
    if importlib.util.find_spec("mkdocs") is None or importlib.util.find_spec("material") is None:
        if os.environ.get("CI"):
            pytest.fail("mkdocs is not installed: README's test command installs the docs extra")
        pytest.skip("mkdocs is not installed: pip install -e '.[docs]'")
    site = tmp_path / "site"
    built = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(REPO / "mkdocs.yml"),
         "--site-dir", str(site)],
        check=False, cwd=REPO, capture_output=True, text=True, timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert built.returncode == 0, built.stdout + built.stderr
    assert "WARNING" not in built.stderr, built.stderr
    for page, anchor in re.findall(r"\]\(docs/([^)#]+)\.md#([^)]+)\)", README):
        html = (site / ("" if page == "index" else page) / "index.html").read_text(encoding="utf-8")
        assert f'id="{anchor}"' in html, f"README links docs/{page}.md#{anchor}, which has no such anchor"
