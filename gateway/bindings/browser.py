"""``binding: {browser: {script: path}}`` — a script that registers the tool's handler in the user's page.

The gateway never runs the script; it serves it to the browser runtime and forwards calls to a live page
(``gateway.runtime.bridge``) that named itself in the call's context.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..context import CallContext
from ..definitions.model import ToolDefinition
from ..definitions.paths import real_inside
from ..errors import ToolError
from . import BindingProblems, Bound, BuildEnv


def build(definition: ToolDefinition, env: BuildEnv) -> Bound:
    script = script_path(definition, env.root)
    tool_id = definition.id

    async def execute(arguments: dict[str, Any], context: CallContext) -> Any:
        if env.bridge is None or context.session is None:
            raise ToolError(
                f"Tool '{tool_id}' runs in the user's browser: call it with a browser session "
                "(header X-Gateway-Session, or _meta.gateway/session on MCP)"
            )
        return await env.bridge.execute(context.session, tool_id, arguments, context)

    return Bound(executor=execute, files=(script,))


def script_path(definition: ToolDefinition, root: Path) -> Path:
    declared = definition.binding["browser"]["script"]
    where = ["binding", "browser", "script"]
    if "\0" in declared:  # no file name holds one, and the OS calls below refuse it with a ValueError
        raise BindingProblems([definition.problem(where, f"script {declared!r} holds a NUL character")])
    base = root.resolve()
    real = real_inside(base / declared, str(base))  # the rule YAML files follow too (gateway.definitions.paths)
    if Path(declared).is_absolute() or real is None:
        raise BindingProblems([definition.problem(where, f"script '{declared}' is outside the definitions directory")])
    path = Path(real)
    if path.suffix != ".js":
        raise BindingProblems([definition.problem(where, f"script '{declared}' must be a .js file")])
    if not path.is_file():
        raise BindingProblems([definition.problem(where, f"script '{declared}' does not exist")])
    return path
