"""Starting points for a new definitions file in the admin console: ``http``, ``python`` or ``empty``.

Each template is a catalog that builds as it is: its tool id comes from the file name and is made unique
against the tools served now, an ``http`` tool calls the demo API the gateway serves itself, and a ``python``
tool comes with its module in ``python/`` (named after the tool, so a new file never takes an existing one's).
"""

from __future__ import annotations

import re
from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import PurePosixPath

from ...errors import BadRequest

TEMPLATES = ("http", "python", "empty")
_NOT_IN_ID = re.compile(r"[^A-Za-z0-9_]+")

_HTTP = """\
# A tool that calls an HTTP API. Scheme, host and port are fixed here; arguments fill the query, path or body.
tools:
  - id: {id}
    name: {name}
    user_description: Finds weather stations by name (replace with what your tool does for people).
    ai_description: >-
      Searches the demo weather stations by part of their name. Tell the model what the tool does, when to
      use it and what it returns.
    input_schema:
      type: object
      required: [query]
      properties:
        query: {{type: string, minLength: 1, description: "Part of a station's name, e.g. 'oslo'."}}
      additionalProperties: false
    binding:
      http:
        method: GET
        url: "{{{{ gateway.base_url }}}}/demo/stations"
        query:
          q: "{{{{ args.query }}}}"
    annotations: {{read_only: true, idempotent: true, open_world: false}}
    tags: [new]
"""

_PYTHON = """\
# A tool that runs a Python function from python/{module}.py; its parameters are the tool's arguments.
tools:
  - id: {id}
    name: {name}
    user_description: Repeats a text (replace with what your tool does for people).
    ai_description: >-
      Returns the text it is given, repeated the given number of times. Tell the model what the tool does,
      when to use it and what it returns.
    binding:
      python: {module}:run
    annotations: {{read_only: true, idempotent: true, open_world: false}}
    tags: [new]
"""

_MODULE = '''\
"""The function behind the {id} tool (declared in {file})."""


def run(text: str, times: int = 1) -> str:
    """Repeat ``text`` ``times`` times.

    Args:
        text: What to repeat.
        times: How many times.
    """
    return text * times
'''

_EMPTY = """\
# Tools declared in this file (see the other files of this directory, or docs/tools.md, for examples).
tools: []
"""


@dataclass(frozen=True)
class NewFiles:
    definitions: str  # the YAML text
    modules: dict[str, str] = field(default_factory=dict)  # python/ files to create with it: path -> text


def new_files(template: str, path: str, taken: Container[str]) -> NewFiles:
    """The files a new definitions file at ``path`` (below the definitions directory) starts as."""
    if template not in TEMPLATES:
        raise BadRequest(f"Unknown template {template!r}; use one of: {', '.join(TEMPLATES)}.")
    if template == "empty":
        return NewFiles(_EMPTY)
    tool_id = _unique_id(PurePosixPath(path).stem, taken)
    name = tool_id.replace("_", " ").capitalize()
    if template == "http":
        return NewFiles(_HTTP.format(id=tool_id, name=name))
    module = f"{tool_id.lower()}_tool"
    return NewFiles(_PYTHON.format(id=tool_id, name=name, module=module),
                    {f"python/{module}.py": _MODULE.format(id=tool_id, file=_in_docstring(path))})


def _in_docstring(text: str) -> str:
    """``text`` escaped to stand inside the module's docstring as itself: a file may be named
    ``x\"\"\"; os.system(...); \"\"\".yaml``, and the console writes YAML, never code that runs."""
    return text.encode("unicode_escape").decode("ascii").replace('"', '\\"')


def _unique_id(stem: str, taken: Container[str]) -> str:
    base = _NOT_IN_ID.sub("_", stem).strip("_") or "new_tool"
    if not base[0].isalpha():
        base = f"tool_{base}"
    base = base[:60]
    candidate, number = base, 2
    while candidate in taken:
        candidate, number = f"{base}_{number}", number + 1
    return candidate
