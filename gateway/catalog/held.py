"""Tools held to the lock file (``gateway.catalog.lock``) while a gateway serves: what an upstream, an OpenAPI
document or a plugin changed since the admin ran ``tool-gateway lock`` is not served silently.

With ``tools.lock.json`` in the definitions directory, every build a gateway swaps in is compared with it:

- a tool whose descriptions, schemas, name or annotations changed is served **as locked** — what the model reads
  is the locked text and schema — and a call whose arguments the upstream's new input schema refuses is an error
  result saying so; or, where its source says ``on_change: hold``, it is not served until approved;
- a tool whose binding changed (what its call does: another upstream tool, another endpoint) is not served: the
  locked text would describe a different call;
- a tool the lock does not know is not served until approved; a rename (the same content under a new id) is
  served; a vanished tool is reported.

Each is a warning naming the tool (``/status``, the console's problems page, the log). Approving is recording the
lock again: ``tool-gateway lock DIR`` (everything) or ``--tool ID`` (one tool); the file's change is a reload.
A lock file that cannot be read fails the build (the catalog being served stays), as a broken YAML file does.
The CLI's ``validate``, ``lock`` and ``list`` read the build as it is, unheld.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from ..context import CallContext, Executor
from ..definitions.model import SourceDeclaration
from ..errors import DefinitionsInvalid, Problem, ToolError
from ..schema.fastcheck import lazy_check
from ..schema.published import compile_validator
from .lock import LOCK_FILE, compare, entry, read
from .snapshot import Catalog, Tool, plugin_of

_MEMO_KEY = "held.lock"


def hold(catalog: Catalog, sources: Iterable[SourceDeclaration], memo: dict[Any, Any]) -> Catalog:
    """``catalog`` as the lock file in its root allows it to be served (itself when there is none). ``memo``
    keeps the parsed lock between builds (the file is read again only when its size or time changes)."""
    path = catalog.root / LOCK_FILE
    try:
        stat = path.stat()
        text = path.read_bytes() if memo.get(_MEMO_KEY, (None,))[0] != (stat.st_mtime_ns, stat.st_size) else None
    except FileNotFoundError:
        return catalog
    except OSError as exc:
        raise DefinitionsInvalid([Problem(str(path), 1, 1, f"the lock file cannot be read: {exc.strerror}")]) from None
    if text is not None:
        try:
            memo[_MEMO_KEY] = ((stat.st_mtime_ns, stat.st_size), read(text.decode("utf-8")),
                               hashlib.sha256(text).hexdigest())
        except (ValueError, UnicodeDecodeError) as exc:
            raise DefinitionsInvalid([Problem(str(path), 1, 1, f"the lock file cannot be read: {exc}")]) from None
    _, document, lock_digest = memo[_MEMO_KEY]
    declared = {source.id: source for source in sources}
    tools = dict(catalog.tools)
    warnings: list[Problem] = []
    held: list[dict[str, Any]] = []

    def keep(tool_id: str, change: str, served: str) -> None:
        """A held tool, with what the lock says of it and what it says now (the console's diff and approval)."""
        tool = catalog.tools[tool_id]
        held.append({"tool": tool_id, "change": change, "served": served,
                     "locked": document["tools"].get(tool_id), "now": entry(tool, plugin_of(tool, catalog))})

    def warn(tool_id: str, message: str) -> None:
        source = declared.get(tools[tool_id].definition.source or "") if tool_id in tools else None
        where = (source.file, *source.document.position([*source.path, "id"])) if source and source.document \
            else (str(path), 1, 1)
        warnings.append(Problem(*where, f"tool '{tool_id}' {message}", severity="warning"))

    for difference in compare(document, catalog):
        tool_id = difference.tool
        if difference.kind == "changed":
            tool = tools[tool_id]
            source = declared.get(tool.definition.source or "")
            changed = difference.detail
            if "binding" in changed.split(", ") or (source is not None and source.raw.get("on_change") == "hold"):
                warn(tool_id, f"changed since {LOCK_FILE} ({changed}): held, not served until approved "
                              f"(`tool-gateway lock --tool {tool_id}`)")
                keep(tool_id, changed, "no")
                del tools[tool_id]
            else:
                warn(tool_id, f"changed since {LOCK_FILE} ({changed}): served as locked until approved "
                              f"(`tool-gateway lock --tool {tool_id}`)")
                keep(tool_id, changed, "as_locked")
                tools[tool_id] = as_locked(tool, document["tools"][tool_id]["content"])
        elif difference.kind == "new":
            warn(tool_id, f"is not in {LOCK_FILE}: held, not served until approved (`tool-gateway lock --tool "
                          f"{tool_id}`)")
            keep(tool_id, "new", "no")
            del tools[tool_id]
        elif difference.kind == "renamed":
            warn(tool_id, f"is a rename ({difference.detail}): served")
        else:
            warnings.append(Problem(str(path), 1, 1, f"tool '{tool_id}' is in {LOCK_FILE} but no longer served",
                                    severity="warning"))
    version = hashlib.sha256(f"{catalog.version}\0{lock_digest}".encode()).hexdigest()[:16]
    # Its memos are its own: the new catalog's listings are not the unheld one's.
    return replace(catalog, tools=tools, version=version, warnings=(*catalog.warnings, *warnings),
                   held=tuple(held), _memo={},
                   _memo_locks={}, _memo_lock=threading.Lock())


def as_locked(tool: Tool, locked: Mapping[str, Any]) -> Tool:
    """``tool`` saying what the lock recorded of it, its calls checked against what its upstream takes now too."""
    schema, output = locked["input_schema"], locked["output_schema"]
    definition = replace(tool.definition, name=locked["name"], user_description=locked["user_description"],
                         ai_description=locked["ai_description"], annotations=dict(locked["annotations"] or {}),
                         output_schema=output)
    return Tool(definition, schema, compile_validator(schema),
                compile_validator(output) if output is not None else None,
                {side: _checked(executor, tool) for side, executor in tool.executors.items()}, lazy_check(schema),
                tool.script, None, tool.return_schema, tool.talks)


def _checked(executor: Executor, tool: Tool) -> Executor:
    """``executor`` refusing, before it runs, arguments the upstream's input schema of now refuses."""
    async def checked(arguments: dict[str, Any], context: CallContext) -> Any:
        error = next(iter(tool.validator.iter_errors(arguments)), None)
        if error is not None:
            where = "".join(f"[{part!r}]" if isinstance(part, int) else f".{part}" for part in error.absolute_path)
            raise ToolError(f"Tool '{tool.id}' changed upstream since {LOCK_FILE}, and its new input schema refuses "
                            f"these arguments (at $" + where + f": {error.message}); an admin approves the change "
                            f"with `tool-gateway lock --tool {tool.id}`")
        return await executor(arguments, context)

    return checked
