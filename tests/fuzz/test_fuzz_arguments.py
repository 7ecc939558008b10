"""Arguments drawn from each shipped tool's input schema (hypothesis-jsonschema), sent over REST and MCP.

Valid arguments must never be refused as arguments nor crash anything: the answer is a result, an error
result only when the tool itself fails (a ToolError, an upstream refusing). Arguments made invalid by one
mutation must be an error result that names where they are wrong, as a JSON path.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from fuzz_support import ARGUMENT_ERROR, ENVELOPE, JSON_PATH, MCP_HEADERS, FuzzServer, fuzz, json_values
from hypothesis import assume, given
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from jsonschema import Draft202012Validator
from support import EXAMPLES, catalog_for

SCHEMAS = {tool.id: tool.input_schema for tool in catalog_for(EXAMPLES).tools.values()}


@st.composite
def invalid_arguments(draw: st.DrawFn, schema: dict[str, Any]) -> dict[str, Any]:
    """Valid arguments broken one way: a property of the wrong value, an unknown property, a required one gone."""
    arguments = dict(draw(from_schema(schema)))
    properties = list(schema.get("properties", {}))
    ways = ["unknown"] if schema.get("additionalProperties") is False else []
    ways += ["wrong"] * bool(properties) + ["missing"] * bool(schema.get("required"))
    assume(ways)
    way = draw(st.sampled_from(ways))
    if way == "wrong":
        arguments[draw(st.sampled_from(properties))] = draw(json_values)
    elif way == "unknown":
        arguments[draw(st.text(min_size=1, max_size=8).filter(lambda name: name not in properties))] = \
            draw(json_values)
    else:
        del arguments[draw(st.sampled_from(schema["required"]))]
    assume(not Draft202012Validator(schema).is_valid(arguments))
    return arguments


def mcp_call(server: FuzzServer, tool_id: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": tool_id, "arguments": arguments, "_meta": ENVELOPE}}
    answer = server.client.post("/mcp", content=json.dumps(body), headers=MCP_HEADERS | {"Mcp-Name": tool_id})
    assert answer.status_code == 200, answer.text
    return answer.json()["result"]


@pytest.mark.parametrize("tool_id", sorted(SCHEMAS))
@fuzz(10)
@given(data=st.data())
def test_valid_arguments_are_never_refused_nor_crash(fuzz_server: FuzzServer, tool_id: str, data: st.DataObject
                                                     ) -> None:
    """Arguments valid under the tool's schema give a result over REST and MCP, never an argument error or a 500."""
    arguments = data.draw(from_schema(SCHEMAS[tool_id]), label="arguments")
    answer = fuzz_server.call(tool_id, json.dumps(arguments).encode())
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert not ARGUMENT_ERROR.match(result.get("error") or ""), result
    assert "internal error" not in (result.get("error") or ""), result
    over_mcp = mcp_call(fuzz_server, tool_id, arguments)
    assert not ARGUMENT_ERROR.match(over_mcp["content"][0]["text"]), over_mcp


@pytest.mark.parametrize("tool_id", sorted(SCHEMAS))
@fuzz(10)
@given(data=st.data())
def test_invalid_arguments_are_an_error_result_with_a_json_path(fuzz_server: FuzzServer, tool_id: str,
                                                                data: st.DataObject) -> None:
    """Arguments broken by one mutation are an is_error result naming where, as a JSON path, over REST and MCP."""
    arguments = data.draw(invalid_arguments(SCHEMAS[tool_id]), label="arguments")
    answer = fuzz_server.call(tool_id, json.dumps(arguments).encode())
    assert answer.status_code == 200, answer.text
    result = answer.json()
    assert result["is_error"] and ARGUMENT_ERROR.match(result["error"]), result
    assert JSON_PATH.search(result["error"]), result
    over_mcp = mcp_call(fuzz_server, tool_id, arguments)
    assert over_mcp["isError"] and JSON_PATH.search(over_mcp["content"][0]["text"]), over_mcp
