"""invoke(): argument parsing and validation, side choice, timeouts, failures and result normalisation."""

from __future__ import annotations

import asyncio
import logging

import pytest
from support import EXAMPLES, catalog_for

from gateway.context import CallContext
from gateway.errors import UnknownTool
from gateway.invoke import invoke

TOOLS_PY = '''
import asyncio
import time
from dataclasses import dataclass
from enum import Enum

from gateway import ToolError


class Mood(Enum):
    HAPPY = "happy"
    SAD = "sad"


@dataclass
class Report:
    mood: Mood
    count: int


def echo(text: str) -> str:
    return text


async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"


def blocking(seconds: float) -> str:
    time.sleep(seconds)
    return "done"


def crash() -> str:
    raise KeyError("secret internal detail")


def refuse(reason: str) -> str:
    raise ToolError(f"refused: {reason}")


def report(mood: Mood, count: int = 1) -> Report:
    return Report(mood, count)


def whoami(text: str, conversation_id: str | None = None, user: str | None = None, tool_call_id: str = "") -> dict:
    return {"text": text, "conversation_id": conversation_id, "user": user, "tool_call_id": tool_call_id}


def big(n: int) -> str:
    return "x" * n


def wrong_shape() -> dict:
    return {"count": "many"}


def not_json() -> object:
    return object()
'''

DEFS = '''
tools:
  - {id: echo, name: Echo, user_description: u, ai_description: a, binding: {python: "tools:echo"}}
  - {id: slow, name: Slow, user_description: u, ai_description: a, timeout_s: 0.2, binding: {python: "tools:slow"}}
  - {id: blocking, name: Blocking, user_description: u, ai_description: a, timeout_s: 0.2,
     binding: {python: "tools:blocking"}}
  - {id: crash, name: Crash, user_description: u, ai_description: a, binding: {python: "tools:crash"}}
  - {id: refuse, name: Refuse, user_description: u, ai_description: a, binding: {python: "tools:refuse"}}
  - {id: report, name: Report, user_description: u, ai_description: a, binding: {python: "tools:report"}}
  - {id: whoami, name: Who am I, user_description: u, ai_description: a, binding: {python: "tools:whoami"}}
  - {id: big, name: Big, user_description: u, ai_description: a, binding: {python: "tools:big"}}
  - id: wrong_shape
    name: Wrong shape
    user_description: u
    ai_description: a
    binding: {python: "tools:wrong_shape"}
    output_schema: {type: object, properties: {count: {type: integer}}, required: [count]}
  - {id: not_json, name: Not JSON, user_description: u, ai_description: a, binding: {python: "tools:not_json"}}
'''


@pytest.fixture
def catalog(write_definitions):
    root = write_definitions({"python/tools.py": TOOLS_PY, "tools.yaml": DEFS})
    return catalog_for(root, max_result_chars=50)


@pytest.fixture(scope="module")
def examples():
    return catalog_for(EXAMPLES)


async def test_square_root_of_the_seed(examples):
    """square_root(475695037565) is 689706.486532…, the LangChain4j seed's example."""
    result = await invoke(examples, "square_root", {"x": 475695037565})
    assert not result.is_error
    assert result.value == pytest.approx(689706.486532, abs=1e-6)
    assert result.text.startswith("689706.486532")


@pytest.mark.parametrize("raw", [{"text": "hi"}, '{"text": "hi"}', '"hi"', "hi", b'{"text": "hi"}'])
async def test_arguments_arrive_in_every_accepted_form(catalog, raw):
    """A JSON object, a JSON string of one, a JSON string value or a bare string all reach a one-parameter tool."""
    result = await invoke(catalog, "echo", raw)
    assert (result.is_error, result.value) == (False, "hi")


async def test_wrong_type_names_path_expectation_and_value(catalog):
    """A type mismatch says where ($.text), what was expected and what came."""
    result = await invoke(catalog, "echo", {"text": 5})
    assert result.is_error
    assert "at $.text: expected string, got integer 5" in result.error


async def test_missing_and_extra_properties_are_explained(catalog):
    """A missing required property and an unexpected one are both reported, by name."""
    result = await invoke(catalog, "echo", {"txt": "hi"})
    assert "missing required property 'text'" in result.error
    assert "unexpected property 'txt' (allowed: text)" in result.error


async def test_enum_failure_lists_the_allowed_values(catalog):
    """An enum mismatch lists the allowed values; the derived schema comes from the Enum type hint."""
    result = await invoke(catalog, "report", {"mood": "meh"})
    assert 'expected one of "happy", "sad", got "meh"' in result.error


async def test_non_object_for_a_multi_parameter_tool_is_an_error_result(catalog):
    """A bare value for a tool with several parameters is an error result naming the parameters."""
    result = await invoke(catalog, "report", "[1, 2]")
    assert result.is_error and "expected a JSON object with the parameters (mood, count), got array" in result.error


async def test_unknown_tool_lists_close_matches(catalog):
    """An unknown id raises UnknownTool naming close matches."""
    with pytest.raises(UnknownTool) as caught:
        await invoke(catalog, "ecko", {})
    assert caught.value.close_matches == ("echo",)
    assert "Did you mean: echo?" in str(caught.value)


@pytest.mark.parametrize("tool", ["slow", "blocking"])
async def test_timeout_becomes_an_error_result(catalog, tool):
    """A tool running past timeout_s (async or sync in a thread) gives an error result, not a hang."""
    result = await invoke(catalog, tool, {"seconds": 1})
    assert result.is_error and f"Tool '{tool}' did not finish within 0.2 s." == result.error


async def test_exception_internals_are_logged_not_returned(catalog, caplog):
    """An unexpected exception's details go to the log; the LLM gets the type and a reference only."""
    with caplog.at_level(logging.ERROR, logger="gateway.invoke"):
        result = await invoke(catalog, "crash", {})
    assert result.is_error and "internal error (KeyError)" in result.error
    assert "secret internal detail" not in result.error
    reference = result.error.split("ref ")[1].rstrip(".")
    assert any(reference in r.getMessage() and r.exc_info for r in caplog.records)


async def test_tool_error_message_reaches_the_llm(catalog):
    """A ToolError raised by the tool is the result's message, verbatim."""
    result = await invoke(catalog, "refuse", {"reason": "no"})
    assert (result.is_error, result.error) == (True, "refused: no")


async def test_enum_and_dataclass_results_become_json(catalog):
    """Enum arguments arrive as members; dataclass/Enum results come back as JSON values and text."""
    result = await invoke(catalog, "report", {"mood": "happy"})
    assert result.value == {"mood": "happy", "count": 1}
    assert result.text == '{"mood": "happy", "count": 1}'


async def test_context_is_injected_and_hidden_from_the_schema(catalog):
    """conversation_id, user and tool_call_id reach parameters of those names and are not in the schema."""
    tool = catalog.get("whoami")
    assert set(tool.input_schema["properties"]) == {"text"}
    context = CallContext(conversation_id="c1", user="ann", tool_call_id="call_9")
    result = await invoke(catalog, "whoami", {"text": "x"}, context)
    assert result.value == {"text": "x", "conversation_id": "c1", "user": "ann", "tool_call_id": "call_9"}


async def test_context_cannot_be_set_through_arguments(catalog):
    """An argument named like a context parameter is rejected, not injected."""
    result = await invoke(catalog, "whoami", {"text": "x", "user": "root"})
    assert result.is_error and "unexpected property 'user'" in result.error


async def test_large_results_are_truncated_with_a_mark(catalog):
    """A result over max_result_chars is cut and says how much was left out."""
    result = await invoke(catalog, "big", {"n": 80})
    assert result.truncated and result.text.startswith("x" * 50) and "[truncated: 30 more characters]" in result.text


async def test_output_schema_violation_is_an_error_result(catalog):
    """A result that does not match the output schema is reported as an error with its JSON path."""
    result = await invoke(catalog, "wrong_shape", {})
    assert result.is_error and "does not match its output schema: at $.count: expected integer" in result.error


async def test_non_json_result_is_an_error_result(catalog):
    """A result that cannot be made JSON is an error result, not a crash."""
    result = await invoke(catalog, "not_json", {})
    assert result.is_error and "is not JSON" in result.error


async def test_structured_output_is_flagged(examples):
    """A tool with an output schema marks its checked result as structured."""
    result = await invoke(examples, "diff_time", {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T06:00:00Z"})
    assert result.structured and result.value["hours"] == 6


async def test_client_tool_without_a_browser_session_is_an_error_result(examples, write_definitions):
    """A browser-only tool called with no browser session says how to call it instead of failing."""
    root = write_definitions({
        "scripts/t.js": "// handler\n",
        "t.yaml": """
            tools:
              - {id: t, name: T, user_description: u, ai_description: a, binding: {browser: {script: scripts/t.js}}}
        """,
    })
    result = await invoke(catalog_for(root), "t", {})
    assert result.is_error and result.side == "client" and "runs in the user's browser" in result.error


async def test_concurrent_calls_each_get_their_own_result(catalog):
    """Concurrent calls of a sync tool (run in worker threads) each return their own arguments' result."""
    results = await asyncio.gather(*(invoke(catalog, "echo", {"text": str(i)}) for i in range(20)))
    assert [r.value for r in results] == [str(i) for i in range(20)]


async def test_bare_number_for_a_string_parameter_is_text(examples):
    """`example-tool 42` passes the text "42" to the one string parameter, as the seed's tools read input."""
    result = await invoke(examples, "example-tool", "42")
    assert (result.is_error, result.value) == (False, "42 answered")


async def test_concurrent_calls_beyond_the_limit_wait_for_a_slot(write_definitions):
    """With max_concurrent_calls=2, no more than two calls execute at once; the others wait, then run."""
    root = write_definitions({
        "python/gate.py": """
            import asyncio

            running = 0
            peak = 0


            async def work() -> int:
                global running, peak
                running += 1
                peak = max(peak, running)
                await asyncio.sleep(0.05)
                running -= 1
                return peak
        """,
        "t.yaml": """
            tools:
              - {id: work, name: W, user_description: u, ai_description: a, binding: {python: "gate:work"}}
        """,
    })
    catalog = catalog_for(root, max_concurrent_calls=2)
    results = await asyncio.gather(*(invoke(catalog, "work") for _ in range(6)))
    assert not any(r.is_error for r in results)
    assert max(r.value for r in results) == 2


async def test_a_call_waiting_for_a_slot_times_out_cleanly(write_definitions):
    """A call that cannot get a slot within its timeout becomes a timeout error result."""
    root = write_definitions({
        "python/hold.py": "import asyncio\n\n\nasync def hold(seconds: float) -> str:\n"
                          "    await asyncio.sleep(seconds)\n    return 'done'\n",
        "t.yaml": """
            tools:
              - {id: hold, name: H, user_description: u, ai_description: a, timeout_s: 0.3,
                 binding: {python: "hold:hold"}}
        """,
    })
    catalog = catalog_for(root, max_concurrent_calls=1)
    first, second = await asyncio.gather(invoke(catalog, "hold", {"seconds": 0.2}),
                                         invoke(catalog, "hold", {"seconds": 0.2}))
    assert not first.is_error
    assert second.is_error and "did not finish within 0.3 s" in second.error
