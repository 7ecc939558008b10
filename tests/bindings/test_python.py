"""The python binding: trusted code only, sync and async functions, module changes picked up by a new build."""

from __future__ import annotations

import pytest
import yaml
from support import catalog_for

from gateway.errors import DefinitionsInvalid
from gateway.invoke import invoke

TOOL = """
tools:
  - {id: t, name: T, user_description: u, ai_description: a, binding: {python: "%s"}}
"""


@pytest.fixture
def acme(tmp_path, monkeypatch):
    """An installed-like package `acme_tools` outside the definitions directory."""
    package = tmp_path / "site" / "acme_tools"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "text.py").write_text("async def shout(text: str) -> str:\n    return text.upper()\n")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    return package


def test_package_outside_allowed_packages_is_refused_before_import(write_definitions, acme):
    """A module outside <definitions>/python and allowed_packages is refused, and never imported."""
    import sys

    root = write_definitions({"t.yaml": TOOL % "acme_tools.text:shout"})
    with pytest.raises(DefinitionsInvalid, match="module 'acme_tools.text' is not allowed"):
        catalog_for(root)
    assert "acme_tools.text" not in sys.modules


async def test_allowed_package_async_function_is_awaited(write_definitions, acme):
    """With its package allowed, an async function is derived, validated and awaited."""
    root = write_definitions({"t.yaml": TOOL % "acme_tools.text:shout"})
    catalog = catalog_for(root, allowed_packages=("acme_tools",))
    assert catalog.get("t").input_schema["required"] == ["text"]
    assert (await invoke(catalog, "t", {"text": "hi"})).value == "HI"


def test_allowed_prefix_is_a_package_boundary(write_definitions, acme):
    """Allowing `acme` does not allow `acme_tools`: packages match by dotted name, not by string prefix."""
    root = write_definitions({"t.yaml": TOOL % "acme_tools.text:shout"})
    with pytest.raises(DefinitionsInvalid, match="is not allowed"):
        catalog_for(root, allowed_packages=("acme",))


async def test_changed_local_module_is_reimported_by_the_next_build(write_definitions):
    """Editing <definitions>/python/m.py changes what the next catalog runs; the old catalog keeps its function."""
    root = write_definitions({"python/m.py": "def f() -> str:\n    return 'one'\n", "t.yaml": TOOL % "m:f"})
    first = catalog_for(root)
    (root / "python" / "m.py").write_text("def f() -> str:\n    return 'two'\n")
    second = catalog_for(root)
    assert (await invoke(first, "t")).value == "one"
    assert (await invoke(second, "t")).value == "two"
    assert first.version != second.version


def test_local_module_shadowing_an_installed_one_is_refused(write_definitions):
    """A python/json.py would be shadowed by the standard library: the build says to rename it."""
    root = write_definitions({"python/json.py": "def f() -> str:\n    return ''\n", "t.yaml": TOOL % "json:f"})
    with pytest.raises(DefinitionsInvalid, match="has the name of an installed module"):
        catalog_for(root)


def _tool_with_schema(target: str, properties: dict) -> str:
    """One tool `t` bound to ``target`` whose input schema requires every property given."""
    schema = {"type": "object", "properties": properties, "required": list(properties)}
    tool = {"id": "t", "name": "T", "user_description": "u", "ai_description": "a", "input_schema": schema,
            "binding": {"python": target}}
    return yaml.safe_dump({"tools": [tool]}, sort_keys=False)


def test_imported_name_from_an_untrusted_module_is_refused(write_definitions):
    """A local module that imports subprocess.check_output cannot expose it as a tool: what runs must be trusted."""
    root = write_definitions({
        "python/helpers.py": "from subprocess import check_output  # noqa: F401\n",
        "t.yaml": _tool_with_schema("helpers:check_output", {"args": {"type": "array"}}),
    })
    with pytest.raises(DefinitionsInvalid, match="is defined in module 'subprocess', which is not allowed"):
        catalog_for(root)


def test_remote_ref_in_a_schema_is_a_load_problem(write_definitions):
    """A $ref to a URL is refused at load time: validating a call must never fetch anything."""
    root = write_definitions({
        "python/m.py": "def f(x: str) -> str:\n    return x\n",
        "t.yaml": _tool_with_schema("m:f", {"x": {"$ref": "http://127.0.0.1:9/s.json"}}),
    })
    with pytest.raises(DefinitionsInvalid, match=r"t.yaml:\d+:\d+: .*\$ref 'http://127.0.0.1:9/s.json' points outside"):
        catalog_for(root)


def test_a_sync_function_cannot_declare_a_talking_parameter(write_definitions):
    """``progress``, ``log`` and ``client`` are coroutine functions of the event loop, which a sync tool's thread
    cannot await: a load problem at the binding, naming them, not a call that fails."""
    root = write_definitions({"python/m.py": "def f(progress, log, user) -> str:\n    return 'x'\n",
                              "t.yaml": TOOL % "m:f"})
    with pytest.raises(DefinitionsInvalid, match=r"t.yaml:2:\d+: 'm:f' declares 'progress', 'log', which only an "
                                                 r"async function can use: make it `async def`"):
        catalog_for(root)


async def test_talking_parameters_are_silent_where_no_client_listens(write_definitions):
    """Called without a surface's channel (the CLI, contract tests), progress and logs go nowhere, a question is
    an error result saying the caller cannot answer it, and none of them is in the schema the LLM sees."""
    root = write_definitions({
        "python/m.py": """
            async def f(n: int, progress, log, client) -> str:
                await progress(1, 2, "half")
                await log.info("hello")
                if n:
                    await client.sample("hi", max_tokens=5)
                return "ran"
        """,
        "t.yaml": TOOL % "m:f"})
    catalog = catalog_for(root)
    assert list(catalog.tools["t"].input_schema["properties"]) == ["n"] and catalog.tools["t"].talks
    assert (await invoke(catalog, "t", {"n": 0})).value == "ran"
    asked = await invoke(catalog, "t", {"n": 1})
    assert asked.is_error and asked.text == "The calling client cannot answer sampling."
