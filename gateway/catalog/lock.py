"""The lock file (``tool-gateway lock DIR``): what the admin trusted of the tools they did not write in YAML.

For every tool an MCP source, an OpenAPI source or a plugin brings, ``tools.lock.json`` in the definitions
directory records what a model sees of it and what its call does — the upstream's name, the display name, both
descriptions, the input and output schemas as served, the annotations and the binding — and a digest of that.
``validate --locked`` compares a fresh build with it, for the CI of a definitions repository: a tool whose content
changed (naming what changed), a tool the lock does not know, a tool the lock knows that is gone, and a tool that
came back under another id saying and taking exactly what a vanished one did (a rename, not a new tool: its
``shape``), each make it exit non-zero.

The format (version 1)::

    {"version": 1,
     "tools": {"<tool id>": {"source": "<source id>" | null, "plugin": "<plugin>" | null,
                             "digest": "sha256:<hex of the canonical JSON of content>",
                             "shape": "sha256:<the same of its descriptions, schemas and annotations>",
                             "content": {"upstream", "name", "user_description", "ai_description",
                                         "input_schema", "output_schema", "annotations", "binding"}}}}
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .snapshot import Catalog, Tool, plugin_of

LOCK_FILE = "tools.lock.json"
VERSION = 1
FIELDS = ("upstream", "name", "user_description", "ai_description", "input_schema", "output_schema", "annotations",
          "binding")
# What a tool says and takes, whatever it is called: the same under another name is a rename.
SHAPE = ("user_description", "ai_description", "input_schema", "output_schema", "annotations")


@dataclass(frozen=True)
class Difference:
    kind: str  # changed | new | vanished | renamed
    tool: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.kind}: {self.tool}" + (f" ({self.detail})" if self.detail else "")


def lock(catalog: Catalog) -> dict[str, Any]:
    """The lock document of ``catalog``: every tool not written in the definitions directory's YAML."""
    tools = {}
    for tool in catalog.tools.values():
        plugin = plugin_of(tool, catalog)
        if tool.definition.source is None and plugin is None:
            continue
        tools[tool.id] = entry(tool, plugin)
    return {"version": VERSION, "tools": dict(sorted(tools.items()))}


def entry(tool: Tool, plugin: str | None) -> dict[str, Any]:
    """What the lock records of ``tool`` (of a source, or of ``plugin``): made once per tool — a serving gateway
    compares every build with the lock, and a reload reuses the tools that did not change. Never modify it."""
    def make() -> dict[str, Any]:
        seen = content(tool)
        return {"source": tool.definition.source, "plugin": plugin, "digest": digest(seen),
                "shape": digest({name: seen[name] for name in SHAPE}), "content": seen}

    return tool.memo(("lock.entry", plugin), make)


def write(path: Path, document: dict[str, Any]) -> None:
    """``document`` as the lock file ``path``, whole or not at all: a CI, or a gateway's reload, never reads half."""
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(dumps(document), encoding="utf-8")
    temporary.replace(path)


def content(tool: Tool) -> dict[str, Any]:
    d = tool.definition
    return {"upstream": d.upstream, "name": d.name, "user_description": d.user_description,
            "ai_description": d.ai_description, "input_schema": tool.input_schema, "output_schema": tool.output_schema,
            "annotations": dict(d.annotations), "binding": d.binding}


def digest(seen: dict[str, Any]) -> str:
    canonical = json.dumps(seen, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()


def compare(locked: dict[str, Any], catalog: Catalog) -> list[Difference]:
    """What differs between the lock document ``locked`` and ``catalog``, in tool order."""
    was: dict[str, Any] = locked.get("tools") or {}
    now = lock(catalog)["tools"]
    vanished = {tool_id: entry for tool_id, entry in was.items() if tool_id not in now}
    by_shape = {entry.get("shape"): tool_id for tool_id, entry in vanished.items()}
    found: list[Difference] = []
    for tool_id, entry in now.items():
        before = was.get(tool_id)
        if before is None:
            old = by_shape.pop(entry["shape"], None)
            if old is not None:
                vanished.pop(old)
                found.append(Difference("renamed", tool_id, f"was '{old}', same content"))
            else:
                found.append(Difference("new", tool_id, "not in the lock"))
        elif before.get("digest") != entry["digest"]:
            fields = [name for name in FIELDS if (before.get("content") or {}).get(name) != entry["content"][name]]
            found.append(Difference("changed", tool_id, ", ".join(fields) or "content"))
    found += [Difference("vanished", tool_id, "in the lock, not served") for tool_id in vanished]
    return found


def approved(locked: dict[str, Any], fresh: dict[str, Any], tool_ids: list[str]) -> dict[str, Any]:
    """``locked`` with the entries of ``tool_ids`` taken from the lock document ``fresh`` (a vanished tool's
    dropped): one approval, the rest of the lock as it was. ``KeyError`` names an id neither knows."""
    tools = dict(locked.get("tools") or {})
    for tool_id in tool_ids:
        if tool_id in fresh["tools"]:
            tools[tool_id] = fresh["tools"][tool_id]
        elif tools.pop(tool_id, None) is None:
            raise KeyError(tool_id)
    return {"version": VERSION, "tools": dict(sorted(tools.items()))}


def read(text: str) -> dict[str, Any]:
    """A lock document from its text; ``ValueError`` says why it is not one, naming the tool whose entry is not
    what ``lock`` writes (a serving gateway serves what an entry says: a hand-edited one is checked whole)."""
    document = json.loads(text)
    if not isinstance(document, dict) or document.get("version") != VERSION or \
            not isinstance(document.get("tools"), dict):
        raise ValueError(f"not a version {VERSION} lock file (write it again with `tool-gateway lock`)")
    for tool_id, entry in document["tools"].items():
        wrong = _misshapen(entry)
        if wrong:
            raise ValueError(f"the entry of tool '{tool_id}' {wrong} (write it again with `tool-gateway lock --tool "
                             f"{tool_id}`)")
    return document


def _misshapen(entry: Any) -> str:
    """What is wrong with one tool's entry, or ""."""
    if not isinstance(entry, dict) or not all(isinstance(entry.get(key), str) for key in ("digest", "shape")):
        return "has no digest and shape"
    seen = entry.get("content")
    if not isinstance(seen, dict) or set(seen) != set(FIELDS):
        return f"has no content of exactly {', '.join(FIELDS)}"
    if not all(isinstance(seen[key], str) for key in ("name", "user_description", "ai_description")):
        return "has a name or description that is not text"
    if not isinstance(seen["input_schema"], dict) or seen["input_schema"].get("type") != "object":
        return "has an input_schema that is not an object schema"
    if not (seen["output_schema"] is None or isinstance(seen["output_schema"], dict)) or \
            not isinstance(seen["annotations"], dict) or not isinstance(seen["binding"], dict):
        return "has an output_schema, annotations or binding of the wrong type"
    return ""


def dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=False, ensure_ascii=False, default=str) + "\n"
