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


async def paced() -> str:
    """The logging and progress scenarios' tool: three steps ~50 ms apart. The gateway has no channel for a Python
    tool's log messages or progress yet, so the steps are only paced; the scenarios say so (xfail)."""
    for _ in range(2):
        await asyncio.sleep(0.05)
    return "Tool execution completed"


def error_handling() -> str:
    raise ToolError("This tool intentionally returns an error for testing")


def needs_client(prompt: str = "", message: str = "") -> str:
    """Sampling and elicitation ask the MCP client something mid-call; the gateway relays neither yet, so the tool
    says so instead of answering as if it had asked."""
    raise ToolError("The gateway does not relay sampling or elicitation requests to the MCP client yet.")


def json_schema_2020_12(name: str = "", address: dict[str, str] | None = None) -> str:
    return f"name={name!r} address={address!r}"


def reconnection() -> str:
    return "Reconnection test completed successfully"
