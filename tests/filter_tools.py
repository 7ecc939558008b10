"""Tools, filters and definitions directories shared by the filter tests (import as ``from filter_tools import ...``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

TOOLS_PY = '''
import asyncio

CALLS = []


def echo(text: str) -> dict:
    CALLS.append(text)
    return {"echo": text, "secret": "key-1234 of alice@example.com"}


async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"
'''

FILTERS_PY = '''
import asyncio
import dataclasses

from gateway import ToolError


def mark(label):
    async def run(call, next):
        call.state.setdefault("order", []).append(label)
        result = await next()
        return dataclasses.replace(result, text=result.text + f"<{label}>")
    return run


outer = mark("settings")
middle = mark("toolset")
inner = mark("tool")


async def shout(call, next):
    call.arguments["text"] = call.arguments["text"].upper()
    return await next()


async def break_arguments(call, next):
    call.arguments["text"] = 42
    return await next()


async def answer(call, next):
    return {"echo": "from the filter", "secret": ""}


async def where(call, next):
    return {"echo": call.surface, "secret": ""}


async def refuse(call, next):
    raise ToolError("not today")


async def crash(call, next):
    raise KeyError("internal detail")


async def forget(call, next):
    await next()


def sync_suffix(call, next, suffix="!"):
    result = next()
    return dataclasses.replace(result, text=result.text + suffix)


async def hang(call, next):
    await asyncio.sleep(60)


def sync_waits(call, next):
    return next()


def not_a_filter(call):
    return None
'''


def tool_yaml(tool_id: str, function: str, filters: str = "", toolsets: str = "", annotations: str = "") -> str:
    return textwrap.indent(textwrap.dedent(f"""\
        - id: {tool_id}
          name: {tool_id}
          user_description: A tool.
          ai_description: A tool.
          binding: {{python: "{function}"}}
        """) + textwrap.indent(filters + toolsets + annotations, "  "), "  ")


def make_dir(tmp_path: Path, tools: list[str], filters_py: str = FILTERS_PY) -> Path:
    root = tmp_path / "defs"
    (root / "python").mkdir(parents=True)
    (root / "python" / "ftools.py").write_text(TOOLS_PY)
    (root / "python" / "myfilters.py").write_text(filters_py)
    (root / "tools.yaml").write_text("tools:\n" + "".join(tools))
    return root


def surfaces_dir(tmp_path: Path) -> Path:
    """Tools that show each power of a filter on any surface (with the settings filter ``SETTINGS_FILTERS``)."""
    schema = "output_schema: {type: object, properties: {echo: {type: string}, secret: {type: string}}}\n"
    return make_dir(tmp_path, [
        tool_yaml("shouted", "ftools:echo", filters='filters: ["myfilters:shout"]\n'),
        tool_yaml("refused", "ftools:echo", filters='filters: ["myfilters:refuse"]\n'),
        tool_yaml("crashing", "ftools:echo", filters='filters: ["myfilters:crash"]\n'),
        tool_yaml("answered", "ftools:echo", filters='filters: ["myfilters:answer"]\n'),
        tool_yaml("surfaced", "ftools:echo", filters='filters: ["myfilters:where"]\n'),
        tool_yaml("schema", "ftools:echo", filters="filters: [attach_output_schema]\n" + schema),
    ])


# Every call's result loses the address (settings filters wrap every tool).
SETTINGS_FILTERS = ({"use": "redact", "with": {"literals": ["alice@example.com"]}},)
