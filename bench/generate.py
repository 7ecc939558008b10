"""Generate a definitions directory of N tools (10 per file) bound to one local Python module; shared by benches."""

from __future__ import annotations

import sys
from pathlib import Path

MODULE = '''
from typing import Annotated


def lookup(query: Annotated[str, "What to look up."], limit: int = 10, exact: bool = False) -> dict:
    return {"query": query, "limit": limit, "exact": exact}
'''

TOOL = """  - id: tool_{n}
    name: Tool {n}
    user_description: Looks something up (generated tool {n}).
    ai_description: Looks up records matching a query; use it when the user asks about item {n}.
    binding: {{python: "generated:lookup"}}
    input_schema:
      type: object
      properties:
        query: {{type: string, description: What to look up about item {n}., maxLength: 200}}
        limit: {{type: integer, minimum: 1, maximum: 100}}
        exact: {{type: boolean}}
      required: [query]
    tags: [generated, group{group}]
    toolsets: [set{group}]
    annotations: {{read_only: true}}
"""


def write_file(root: Path, index: int, per_file: int = 10, marker: str = "") -> Path:
    path = root / f"tools_{index:05d}.yaml"
    tools = "".join(TOOL.format(n=index * per_file + i, group=index % 10) for i in range(per_file))
    path.write_text(f"# {marker}\ntools:\n{tools}", encoding="utf-8")
    return path


def generate(root: Path, count: int, per_file: int = 10) -> Path:
    (root / "python").mkdir(parents=True, exist_ok=True)
    (root / "python" / "generated.py").write_text(MODULE, encoding="utf-8")
    for index in range(count // per_file):
        write_file(root, index, per_file)
    return root


if __name__ == "__main__":
    generate(Path(sys.argv[1]), int(sys.argv[2]))
