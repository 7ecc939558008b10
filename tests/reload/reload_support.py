"""Helpers for the hot-reload tests (``from reload_support import ...``): files to rewrite, and waiting on
conditions with a deadline, never on time."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from support import until as support_until
from support import until_async

PROBE = '''
from typing import Annotated


def echo(text: Annotated[str, "Text to send back."]) -> str:
    return text


def version() -> str:
    return "{version}"
'''


def tool_yaml(*ids: str, function: str = "echo", description: str = "Sends the text back.") -> str:
    """A definitions file declaring ``ids``, each bound to ``reload_probe:<function>``."""
    tools = "".join(
        f"  - id: {tool_id}\n    name: {tool_id}\n    user_description: {description}\n"
        f"    ai_description: {description}\n    binding: {{python: \"reload_probe:{function}\"}}\n"
        for tool_id in ids
    )
    return f"tools:\n{tools}"


def write(path: Path, text: str) -> None:
    """Replace ``path`` atomically, as editors and config tools do (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    os.replace(partial, path)


async def until(condition: Callable[[], object], what: str, timeout: float = 20.0) -> None:
    """``support.until_async`` polled every 5 ms: a reload test watches states that last only a moment."""
    await until_async(condition, what, timeout, step=0.005)


def wait_until(condition: Callable[[], object], what: str, timeout: float = 20.0) -> None:
    """``until`` for synchronous tests."""
    support_until(condition, what, timeout, step=0.005)


async def break_then_restore(gateway: Any, path: Path, valid: str) -> None:
    """Write an invalid edit, wait for its failed rebuild, then restore ``valid`` and wait for a good no-op rebuild."""
    seen = gateway.last_reload.at
    write(path, valid + "  - id: 'not an id'\n    name: x\n")
    await until(lambda: gateway.last_reload.at > seen and not gateway.last_reload.ok, "the failed rebuild")
    seen = gateway.last_reload.at
    write(path, valid)  # back to what is served: builds fine, same version
    await until(lambda: gateway.last_reload.at > seen and gateway.last_reload.ok, "the no-op rebuild")
    assert not gateway.last_reload.changed
