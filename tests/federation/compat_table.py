"""The compatibility table of docs/interop.md, rendered from what the federation matrix's tests recorded, never
written by hand: one row per upstream (name, version, transport, the revision it settled on), one column per check.

    python tests/federation/compat_table.py --write    # the page's table from the last whole run of the matrix

The matrix's conftest records each check's outcome and, at the end of a session that ran them all, writes them to
``RESULTS``; ``test_compat_table.py`` compares the page with the table of the session itself."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PAGE = HERE.parent.parent / "docs" / "interop.md"
RESULTS = HERE / ".results.json"  # ignored by git: the last whole run's outcomes
START, END = "<!-- compatibility:start -->", "<!-- compatibility:end -->"
CHECK_TITLES = {"listed": "Listed", "called": "Called", "content": "Content", "restart": "Restart"}
SHOWN = {"passed": "yes", "xfailed": "no", "failed": "FAILS", "skipped": "not run"}


def render(rows: list[dict]) -> str:
    """The Markdown table of ``rows`` (each: name, version, transport, revision, checks: check -> outcome, reasons:
    check -> why it is expected to fail), the reasons as numbered notes under it."""
    notes: list[str] = []
    lines = ["| Upstream | Version | Transport | Revision | " + " | ".join(CHECK_TITLES.values()) + " |",
             "|---|---|---|---|" + "---|" * len(CHECK_TITLES)]
    for row in rows:
        cells = []
        for check in CHECK_TITLES:
            cell = SHOWN[row["checks"].get(check, "skipped")]
            if reason := row.get("reasons", {}).get(check):
                if reason not in notes:
                    notes.append(reason)
                cell += f" ({notes.index(reason) + 1})"
            cells.append(cell)
        lines.append(f"| {row['name']} | {row['version']} | {row['transport']} | {row['revision']} | "
                     + " | ".join(cells) + " |")
    lines += [""] + [f"({number}) {note}" for number, note in enumerate(notes, 1)]
    return "\n".join(lines).rstrip("\n") + "\n"


def section(page: str) -> str:
    """The text between the page's markers."""
    start, end = page.find(START), page.find(END)
    if start < 0 or end < start:
        raise ValueError(f"{PAGE.name} has no {START} … {END} section")
    return page[start + len(START):end].strip("\n") + "\n"


def replaced(page: str, table: str) -> str:
    start, end = page.index(START), page.index(END)
    return page[:start + len(START)] + "\n" + table + page[end:]


def main(argv: list[str]) -> int:
    if argv != ["--write"]:
        print(__doc__)
        return 2
    if not RESULTS.exists():
        print("no results yet: run the whole matrix first (python -m pytest tests/federation), then this again")
        return 1
    table = render(json.loads(RESULTS.read_text()))
    PAGE.write_text(replaced(PAGE.read_text(), table))
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
