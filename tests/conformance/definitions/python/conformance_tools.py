"""The tools the MCP conformance suite's server scenarios call, answering what each scenario expects
(@modelcontextprotocol/conformance, tests/clients/package.json)."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import wave

import mcp_types

from gateway import ToolError

# A 1x1 red PNG and a short silent WAV: the scenarios check the block's type, mimeType and that data is present.
RED_PIXEL_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="


def _silent_wav() -> str:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as wav:
        wav.setnchannels(1)
        wav.setsampwidth(1)
        wav.setframerate(8000)
        wav.writeframes(bytes([128] * 80))  # 10 ms of silence (8-bit samples centre on 128)
    return base64.b64encode(buffer.getvalue()).decode()


def simple_text() -> str:
    return "This is a simple text response for testing."


# No return annotations on the content tools: a content block is no JSON value, so no output schema derives from one.
def image_content():
    return mcp_types.ImageContent(type="image", data=RED_PIXEL_PNG, mime_type="image/png")


def audio_content():
    return mcp_types.AudioContent(type="audio", data=_silent_wav(), mime_type="audio/wav")


def embedded_resource():
    return mcp_types.EmbeddedResource(type="resource", resource=mcp_types.TextResourceContents(
        uri="test://embedded-resource", mime_type="text/plain", text="This is an embedded resource content."))


def multiple_content_types():
    resource = mcp_types.TextResourceContents(uri="test://mixed-content-resource", mime_type="application/json",
                                              text=json.dumps({"test": "data", "value": 123}))
    return [mcp_types.TextContent(type="text", text="Multiple content types test:"),
            mcp_types.ImageContent(type="image", data=RED_PIXEL_PNG, mime_type="image/png"),
            mcp_types.EmbeddedResource(type="resource", resource=resource)]


async def with_logging(log) -> str:
    """Three info messages ~50 ms apart, through the ``log`` context parameter (scenario tools-call-with-logging)."""
    await log.info("Tool execution started")
    await asyncio.sleep(0.05)
    await log.info("Tool processing data")
    await asyncio.sleep(0.05)
    await log.info("Tool execution completed")
    return "Tool with logging executed successfully"


async def with_progress(progress) -> str:
    """0, 50 and 100 of 100, ~50 ms apart, through the ``progress`` context parameter (no-op without a token)."""
    await progress(0, 100)
    await asyncio.sleep(0.05)
    await progress(50, 100)
    await asyncio.sleep(0.05)
    await progress(100, 100)
    return "Tool with progress executed successfully"


def error_handling() -> str:
    raise ToolError("This tool intentionally returns an error for testing")


async def sampling(prompt: str, client) -> str:
    answer = await client.sample(prompt, max_tokens=100)
    return f"LLM response: {answer['content'].get('text', '')}"


async def elicitation(message: str, client) -> str:
    answer = await client.elicit(message, {
        "type": "object",
        "properties": {"username": {"type": "string", "description": "User's response"},
                       "email": {"type": "string", "description": "User's email address"}},
        "required": ["username", "email"]})
    return f"User response: action={answer['action']}, content={json.dumps(answer.get('content'))}"


async def elicitation_defaults(client) -> str:
    answer = await client.elicit("Please review and update the form fields with defaults", {
        "type": "object",
        "properties": {
            "name": {"type": "string", "description": "User name", "default": "John Doe"},
            "age": {"type": "integer", "description": "User age", "default": 30},
            "score": {"type": "number", "description": "User score", "default": 95.5},
            "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"],
                       "default": "active"},
            "verified": {"type": "boolean", "description": "Verification status", "default": True}}})
    return f"Elicitation completed: action={answer['action']}, content={json.dumps(answer.get('content'))}"


async def elicitation_enums(client) -> str:
    answer = await client.elicit("Please select options from the enum fields", {
        "type": "object",
        "properties": {
            "untitledSingle": {"type": "string", "description": "Select one option",
                               "enum": ["option1", "option2", "option3"]},
            "titledSingle": {"type": "string", "description": "Select one option with titles",
                             "oneOf": [{"const": "value1", "title": "First Option"},
                                       {"const": "value2", "title": "Second Option"},
                                       {"const": "value3", "title": "Third Option"}]},
            "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
                           "enum": ["opt1", "opt2", "opt3"],
                           "enumNames": ["Option One", "Option Two", "Option Three"]},
            "untitledMulti": {"type": "array", "description": "Select multiple options",
                              "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {"type": "array", "description": "Select multiple options with titles",
                            "items": {"anyOf": [{"const": "value1", "title": "First Choice"},
                                                {"const": "value2", "title": "Second Choice"},
                                                {"const": "value3", "title": "Third Choice"}]}}}})
    return f"Elicitation completed: action={answer['action']}, content={json.dumps(answer.get('content'))}"


def json_schema_2020_12(name: str = "", address: dict[str, str] | None = None) -> str:
    return f"name={name!r} address={address!r}"


def reconnection() -> str:
    return "Reconnection test completed successfully"
