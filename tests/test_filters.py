"""Invocation filters through ``invoke``: the onion's order and powers, sync and async filters, failures, built-ins,
and their resolution and checks when the catalog is built."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
from filter_tools import FILTERS_PY, make_dir, tool_yaml
from support import catalog_for

from gateway.bindings import BuildEnv
from gateway.context import CallContext
from gateway.definitions.load import load_definitions
from gateway.errors import DefinitionsInvalid
from gateway.filters.chains import build_chains
from gateway.invoke import filter_result, invoke
from gateway.results import normalise
from gateway.settings import Settings


def call(catalog, tool_id: str, arguments: object = None, **context: object):
    return asyncio.run(invoke(catalog, tool_id, arguments, CallContext(**context)))


def test_order_is_settings_then_toolset_then_tool(tmp_path: Path) -> None:
    """Settings filters are outermost, then the toolset's, then the tool's own: the innermost changes the result
    first."""
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters='filters: ["myfilters:inner"]\n',
                                         toolsets="toolsets: [words]\n")])
    settings = Settings(definitions=root, filters=("myfilters:outer",))
    definitions = load_definitions(root)
    chains, problems = build_chains(definitions.tools, BuildEnv(settings=settings, root=root),
                                    {"words": ["myfilters:middle"], "other": ["myfilters:crash"]})
    assert problems == []
    assert [f.name for f in chains.of("echo")] == ["myfilters:outer", "myfilters:middle", "myfilters:inner"]
    catalog = catalog_for(root, filters=("myfilters:outer",))
    result = call(catalog, "echo", {"text": "hi"})
    assert result.text.endswith("<tool><settings>")


def test_a_filter_changes_arguments_before_the_tool(tmp_path: Path) -> None:
    """A filter that changes the arguments before ``next()`` is what the tool receives."""
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters='filters: ["myfilters:shout"]\n')])
    result = call(catalog_for(root), "echo", {"text": "hi"})
    assert not result.is_error and result.value["echo"] == "HI"


def test_arguments_a_filter_breaks_are_validated_again(tmp_path: Path) -> None:
    """Arguments are validated before the filters and again after them: a filter cannot hand the tool invalid
    ones."""
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters='filters: ["myfilters:break_arguments"]\n')])
    result = call(catalog_for(root), "echo", {"text": "hi"})
    assert result.is_error and "Invalid arguments" in result.text
    invalid = call(catalog_for(root), "echo", {"text": 5})
    assert invalid.is_error and "Invalid arguments" in invalid.text  # the filters never saw these


def test_a_filter_answers_without_calling_the_tool(tmp_path: Path) -> None:
    """A filter that returns a value without ``next()`` answers for the tool; the tool does not run."""
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters='filters: ["myfilters:answer"]\n')])
    catalog = catalog_for(root)
    import ftools  # the tool module, importable once the catalog is built

    ftools.CALLS.clear()
    result = call(catalog, "echo", {"text": "hi"})
    assert not result.is_error and result.value == {"echo": "from the filter", "secret": ""}
    assert ftools.CALLS == []


def test_a_filter_raising_tool_error_answers_with_an_error(tmp_path: Path) -> None:
    """``ToolError`` from a filter is an error result carrying its message."""
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters='filters: ["myfilters:refuse"]\n')])
    result = call(catalog_for(root), "echo", {"text": "hi"})
    assert result.is_error and result.text == "not today"


def test_a_failing_filter_is_an_error_result_with_a_log_reference(tmp_path: Path, caplog) -> None:
    """A filter that raises anything else is an error result naming the filter, with a reference to the log."""
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters='filters: ["myfilters:crash"]\n')])
    with caplog.at_level(logging.ERROR, logger="gateway.invoke"):
        result = call(catalog_for(root), "echo", {"text": "hi"})
    assert result.is_error and "myfilters:crash" in result.text and "ref " in result.text
    assert "internal detail" not in result.text
    reference = result.text.rsplit("ref ", 1)[1].rstrip(".")
    assert any(reference in record.getMessage() for record in caplog.records)


def test_a_filter_returning_nothing_is_an_error(tmp_path: Path) -> None:
    """A filter that forgets to return the result is an error result, not a null answer."""
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters='filters: ["myfilters:forget"]\n')])
    result = call(catalog_for(root), "echo", {"text": "hi"})
    assert result.is_error and "myfilters:forget" in result.text


def test_a_sync_filter_calls_next_from_its_thread(tmp_path: Path) -> None:
    """A sync filter runs in a thread, where ``next()`` returns the result; ``with`` values are its keywords."""
    spec = 'filters: [{use: "myfilters:sync_suffix", with: {suffix: "?!"}}]\n'
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters=spec)])
    result = call(catalog_for(root), "echo", {"text": "hi"})
    assert not result.is_error and result.text.endswith("?!") and result.value["echo"] == "hi"


def test_the_timeout_covers_the_filters(tmp_path: Path) -> None:
    """A filter that hangs ends as the tool's timeout error, for async and sync filters alike."""
    hang = 'filters: ["myfilters:hang"]\ntimeout_s: 0.3\n'
    waits = 'filters: ["myfilters:sync_waits"]\ntimeout_s: 0.3\n'
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters=hang),
                               tool_yaml("slow", "ftools:slow", filters=waits)])
    catalog = catalog_for(root)
    hung = call(catalog, "echo", {"text": "hi"})
    assert hung.is_error and "did not finish within" in hung.text
    slow = call(catalog, "slow", {"seconds": 30})
    assert slow.is_error and "did not finish within" in slow.text


def test_load_problems_of_tool_filters_say_where(tmp_path: Path) -> None:
    """Each wrong tool filter is a problem at its file:line:col: untrusted module, unknown built-in, missing
    function, a ``with`` key the function does not take, a function that does not take (call, next)."""
    specs = ('filters:\n  - "os.path:join"\n  - nosuch\n  - "myfilters:missing"\n'
             '  - {use: "myfilters:sync_suffix", with: {colour: red}}\n  - "myfilters:not_a_filter"\n')
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters=specs)])
    with pytest.raises(DefinitionsInvalid) as caught:
        catalog_for(root)
    messages = [str(p) for p in caught.value.problems]
    assert any("tools.yaml:8:" in m and "'os.path' is not allowed" in m for m in messages), messages
    assert any("tools.yaml:9:" in m and "unknown filter 'nosuch'" in m for m in messages), messages
    assert any("tools.yaml:10:" in m and "no attribute 'missing'" in m for m in messages), messages
    assert any("tools.yaml:11:" in m and "colour" in m for m in messages), messages
    assert any("tools.yaml:12:" in m and "must take (call, next)" in m for m in messages), messages


def test_load_problems_of_settings_filters_name_the_setting(tmp_path: Path) -> None:
    """A wrong settings filter is a problem naming the setting and the item."""
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo")])
    with pytest.raises(DefinitionsInvalid) as caught:
        catalog_for(root, filters=("myfilters:outer", {"use": "redact", "with": {"patterns": ["(a"]}}, 5))
    messages = [str(p) for p in caught.value.problems]
    assert any("setting 'filters' [1].with.patterns[0]" in m and "regular expression" in m for m in messages)
    assert any("setting 'filters' [2]" in m and "got int" in m for m in messages)


def test_a_tool_without_filters_has_none(tmp_path: Path) -> None:
    """With no filters declared anywhere, no tool has a filter chain: the call path skips the onion."""
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo")])
    assert catalog_for(root).filters.of("echo") == ()


def test_filters_reload_with_the_catalog(tmp_path: Path) -> None:
    """A change to a filter's module in python/ is what the next catalog runs."""
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters='filters: ["myfilters:answer"]\n')])
    first = call(catalog_for(root), "echo", {"text": "hi"})
    (root / "python" / "myfilters.py").write_text(FILTERS_PY.replace("from the filter", "from the new filter"))
    second = call(catalog_for(root), "echo", {"text": "hi"})
    assert first.value["echo"] == "from the filter" and second.value["echo"] == "from the new filter"


def test_attach_output_schema_wraps_what_the_llm_reads(tmp_path: Path) -> None:
    """``attach_output_schema`` makes the text ``{value, schema}``; the structured value stays the tool's."""
    schema = 'output_schema: {type: object, properties: {echo: {type: string}, secret: {type: string}}}\n'
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters="filters: [attach_output_schema]\n" + schema)])
    result = call(catalog_for(root), "echo", {"text": "hi"})
    assert result.structured and result.value["echo"] == "hi"
    assert json.loads(result.text) == {"value": result.value, "schema": json.loads(json.dumps(
        {"type": "object", "properties": {"echo": {"type": "string"}, "secret": {"type": "string"}}}))}


def test_redact_removes_patterns_and_literals(tmp_path: Path) -> None:
    """``redact`` removes regex and literal matches from the text and every string of the value."""
    spec = ('filters: [{use: redact, with: {patterns: ["key-[0-9]+"], literals: ["alice@example.com"], '
            'replacement: "***"}}]\n')
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters=spec)])
    result = call(catalog_for(root), "echo", {"text": "alice@example.com"})
    assert result.value == {"echo": "***", "secret": "*** of ***"}
    assert "alice" not in result.text and "key-1234" not in result.text


def test_cache_answers_repeats_of_read_only_tools(tmp_path: Path) -> None:
    """``cache`` answers a repeated call of a read-only tool from memory, per user; other tools always run."""
    root = make_dir(tmp_path, [
        tool_yaml("cached", "ftools:echo", filters="filters: [cache]\n", annotations="annotations: {read_only: true}\n"),
        tool_yaml("plain", "ftools:echo", filters="filters: [cache]\n")])
    catalog = catalog_for(root)
    import ftools

    ftools.CALLS.clear()
    for _ in range(3):
        call(catalog, "cached", {"text": "a"}, user="ann")
    call(catalog, "cached", {"text": "a"}, user="bob")
    call(catalog, "plain", {"text": "b"}, user="ann")
    call(catalog, "plain", {"text": "b"}, user="ann")
    assert ftools.CALLS == ["a", "a", "b", "b"]


def test_cache_per_conversation_is_never_shared_between_users(tmp_path: Path) -> None:
    """``cache`` with ``per: conversation`` answers a repeat within one user's conversation, never another user
    who names the same conversation id."""
    spec = "filters: [{use: cache, with: {per: conversation}}]\n"
    root = make_dir(tmp_path, [tool_yaml("cached", "ftools:echo", filters=spec,
                                         annotations="annotations: {read_only: true}\n")])
    catalog = catalog_for(root)
    import ftools

    ftools.CALLS.clear()
    call(catalog, "cached", {"text": "a"}, user="ann", conversation_id="c1")
    call(catalog, "cached", {"text": "a"}, user="ann", conversation_id="c1")
    call(catalog, "cached", {"text": "a"}, user="bob", conversation_id="c1")
    call(catalog, "cached", {"text": "a"}, user="ann", conversation_id="c2")
    assert ftools.CALLS == ["a", "a", "a"]


def test_cache_keeps_no_result_over_the_result_cap(tmp_path: Path) -> None:
    """``cache`` does not keep a result cut at ``max_result_chars``: an entry holds at most about that much, so
    ``max_entries`` bounds the cache's memory."""
    root = make_dir(tmp_path, [tool_yaml("cached", "ftools:echo", filters="filters: [cache]\n",
                                         annotations="annotations: {read_only: true}\n")])
    catalog = catalog_for(root, max_result_chars=100)
    import ftools

    ftools.CALLS.clear()
    assert call(catalog, "cached", {"text": "x" * 200}, user="ann").truncated
    call(catalog, "cached", {"text": "x" * 200}, user="ann")
    call(catalog, "cached", {"text": "short"}, user="ann")
    call(catalog, "cached", {"text": "short"}, user="ann")
    assert ftools.CALLS == ["x" * 200, "x" * 200, "short"]


def test_builtin_options_are_checked_at_load(tmp_path: Path) -> None:
    """A built-in's unknown or mistyped option is a problem at the option."""
    spec = 'filters: [{use: cache, with: {ttl: 5}}, {use: redact, with: {}}]\n'
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters=spec)])
    with pytest.raises(DefinitionsInvalid) as caught:
        catalog_for(root)
    messages = [str(p) for p in caught.value.problems]
    assert any("no option 'ttl'" in m for m in messages) and any("redact needs" in m for m in messages)


def test_toolset_filters_of_the_wrong_shape_are_problems(tmp_path: Path) -> None:
    """Toolset filters that are not a mapping of lists are problems naming the setting, not a crash."""
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo")])
    env = BuildEnv(settings=Settings(definitions=root), root=root)
    tools = load_definitions(root).tools
    assert "expected a mapping" in str(build_chains(tools, env, ["cache"])[1][0])
    assert "expected a list" in str(build_chains(tools, env, {"words": "cache"})[1][0])


def test_return_schema_result_attaches_the_schema(tmp_path: Path) -> None:
    """``return_schema: result`` (settings or tool) wraps what the LLM reads as {value, schema}, once, outermost;
    ``none`` on the tool leaves its text alone."""
    schema = "output_schema: {type: object, properties: {echo: {type: string}, secret: {type: string}}}\n"
    root = make_dir(tmp_path, [
        tool_yaml("wrapped", "ftools:echo", filters="filters: [attach_output_schema]\n" + schema),
        tool_yaml("plain", "ftools:echo", filters=schema + "return_schema: none\n"),
        tool_yaml("redacted", "ftools:echo", filters=schema + 'filters: [{use: redact, with: {literals: ["hi"]}}]\n')])
    catalog = catalog_for(root, return_schema="result")
    wrapped = call(catalog, "wrapped", {"text": "hi"})
    assert json.loads(wrapped.text)["value"] == wrapped.value and "schema" in json.loads(wrapped.text)
    assert [f.name for f in catalog.filters.of("wrapped")] == ["attach_output_schema"]
    assert json.loads(call(catalog, "plain", {"text": "hi"}).text) == {"echo": "hi", "secret": "key-1234 of "
                                                                                               "alice@example.com"}
    redacted = json.loads(call(catalog, "redacted", {"text": "hi"}).text)
    assert redacted["value"]["echo"] == "[redacted]" and redacted["schema"]["type"] == "object"


def test_a_result_from_outside_passes_out_through_the_filters(tmp_path: Path) -> None:
    """``filter_result`` (a client tool's result handed back through the chat loop) runs the tool's filters
    around the given result: redacted, its schema attached; a tool without filters returns it unchanged."""
    spec = 'filters: [attach_output_schema, {use: redact, with: {literals: ["alice"]}}]\n'
    schema = "output_schema: {type: object}\n"
    root = make_dir(tmp_path, [tool_yaml("echo", "ftools:echo", filters=spec + schema),
                               tool_yaml("bare", "ftools:echo", filters=schema)])
    catalog = catalog_for(root)
    given = normalise(catalog.get("echo"), {"who": "alice"}, "client", 1000)
    result = asyncio.run(filter_result(catalog, "echo", {"text": "x"}, CallContext(), given))
    assert json.loads(result.text) == {"value": {"who": "[redacted]"}, "schema": {"type": "object"}}
    assert asyncio.run(filter_result(catalog, "bare", {}, CallContext(), given)) is given
