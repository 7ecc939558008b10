"""The compatibility table of docs/interop.md is the one this session's matrix renders: on a difference the test
fails showing the table to put there (``python tests/federation/compat_table.py --write`` writes it)."""

from __future__ import annotations

import pytest
from compat_table import PAGE, render, section
from harness import rows


def test_the_interop_page_shows_the_compatibility_table_the_matrix_renders():
    whole = rows()
    if whole is None:
        pytest.skip("the whole federation matrix did not run in this session: no table to compare")
    table = render(whole)
    assert section(PAGE.read_text()) == table, (
        "docs/interop.md's compatibility table differs from the matrix's results; run "
        f"`python tests/federation/compat_table.py --write`, or put this between its markers:\n\n{table}")


def test_the_table_numbers_each_reason_once():
    rows_ = [{"name": "a", "version": "1", "transport": "stdio", "revision": "2026-07-28",
              "checks": {"listed": "passed", "called": "passed", "content": "xfailed", "restart": "xfailed"},
              "reasons": {"content": "why", "restart": "why"}},
             {"name": "b", "version": "2", "transport": "HTTP", "revision": "2025-11-25",
              "checks": {"listed": "passed", "called": "failed", "content": "passed", "restart": "xfailed"},
              "reasons": {"restart": "other"}}]
    assert render(rows_) == (
        "| Upstream | Version | Transport | Revision | Listed | Called | Content | Restart |\n"
        "|---|---|---|---|---|---|---|---|\n"
        "| a | 1 | stdio | 2026-07-28 | yes | yes | no (1) | no (1) |\n"
        "| b | 2 | HTTP | 2025-11-25 | yes | FAILS | yes | no (2) |\n"
        "\n(1) why\n(2) other\n")
