"""invoke() as the backstop: whatever an executor raises or returns, the call ends as a result an LLM can read."""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import pytest
from support import catalog_for

from gateway.errors import ToolError
from gateway.invoke import invoke

# No return annotation: the executors swapped in return all kinds of values, which a derived output schema
# (from `-> str`) would refuse.
TOOLS_PY = '''
def noop():
    return "ok"
'''
DEFS = '''
tools:
  - {id: noop, name: Noop, user_description: u, ai_description: a, binding: {python: "failtools:noop"}}
'''


@pytest.fixture
def with_executor(write_definitions):
    """A catalog whose one tool runs the given coroutine function instead of its binding."""
    catalog = catalog_for(write_definitions({"python/failtools.py": TOOLS_PY, "tools.yaml": DEFS}))

    def install(executor):
        tool = catalog.tools["noop"]
        catalog.tools["noop"] = dataclasses.replace(tool, executors={"server": executor})
        return catalog

    return install


@pytest.mark.parametrize("exit_exc", [SystemExit(7), SystemExit(0), KeyboardInterrupt(), GeneratorExit()],
                         ids=["SystemExit(7)", "SystemExit(0)", "KeyboardInterrupt", "GeneratorExit"])
async def test_an_executor_raising_an_exit_is_a_logged_tool_failure(with_executor, caplog, exit_exc):
    """SystemExit, KeyboardInterrupt and GeneratorExit from an executor are error results with a reference
    that the log holds, like any other tool failure; the process goes on."""

    async def executor(arguments, context):
        raise exit_exc

    catalog = with_executor(executor)
    with caplog.at_level(logging.ERROR, logger="gateway.invoke"):
        result = await invoke(catalog, "noop", {})
    assert result.is_error and f"internal error ({type(exit_exc).__name__})" in result.error
    reference = result.error.split("ref ")[1].rstrip(".")
    assert any(reference in r.getMessage() and r.exc_info for r in caplog.records)


async def test_cancellation_still_cancels(with_executor):
    """A call cancelled from outside (its client went away) is cancelled, not turned into a result."""
    started = asyncio.Event()

    async def executor(arguments, context):
        started.set()
        await asyncio.sleep(30)

    catalog = with_executor(executor)
    call = asyncio.ensure_future(invoke(catalog, "noop", {}))
    await started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call


@pytest.mark.parametrize(("returned", "value", "text"), [
    ("bad \ud800 str", "bad \ufffd str", "bad \ufffd str"),
    ({"k\udc80": ["x\ud800"]}, {"k\ufffd": ["x\ufffd"]}, '{"k\ufffd": ["x\ufffd"]}'),
    ("\ud83d\ude00", "\U0001F600", "\U0001F600"),
])
async def test_lone_surrogates_in_a_result_become_replacement_characters(with_executor, returned, value, text):
    """A result holding lone surrogates is an ordinary result whose text and value can be encoded (U+FFFD in
    their place; a split pair is joined)."""

    async def executor(arguments, context):
        return returned

    result = await invoke(with_executor(executor), "noop", {})
    assert (result.is_error, result.value, result.text) == (False, value, text)
    result.text.encode()


async def test_lone_surrogates_in_a_tool_error_become_replacement_characters(with_executor):
    """A tool's own error message holding a lone surrogate reaches the LLM encodable."""

    async def executor(arguments, context):
        raise ToolError("upstream said \ud800")

    result = await invoke(with_executor(executor), "noop", {})
    assert result.is_error and result.error == "upstream said \ufffd"


async def test_a_result_nested_past_the_limit_is_an_error_result_not_a_recursion_error(with_executor):
    """A result nested 1,000 deep (an upstream's JSON answer) is an error result naming the limit, not a crash."""
    deep: list = []
    for _ in range(1000):
        deep = [deep]

    async def returns_deep(arguments, context):
        return deep

    result = await invoke(with_executor(returns_deep), "noop", {})

    assert result.is_error
    assert "more than 100 levels deep" in result.text and "internal error" not in result.text


async def test_a_result_nested_within_the_limit_is_served(with_executor):
    """A result nested 90 deep is an ordinary result."""
    deep: dict = {}
    for _ in range(90):
        deep = {"a": deep}

    async def returns_deep(arguments, context):
        return deep

    result = await invoke(with_executor(returns_deep), "noop", {})

    assert not result.is_error and result.value == deep


async def test_arguments_text_nested_too_deep_to_parse_is_an_argument_error(with_executor):
    """A JSON string of arguments nested deeper than the parser recurses is refused as arguments, not blamed on
    the tool as an internal error."""
    async def never(arguments, context):
        raise AssertionError("the tool must not run")

    result = await invoke(with_executor(never), "noop", "[" * 5000 + "]" * 5000)

    assert result.is_error and "Invalid arguments" in result.text and "internal error" not in result.text
