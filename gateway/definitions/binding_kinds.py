"""The vocabulary of binding kinds that loading and checking need, without the bindings' runtime.

``gateway.definitions.parse`` and ``gateway.definitions.checks`` read these names; the bindings package builds and runs the kinds.
Keeping them here lets definitions be loaded and checked without importing anything that executes a tool.
"""

from __future__ import annotations

SERVER_BINDINGS = ("python", "http", "mcp")  # the kinds that run in the gateway; "browser" runs in the page
PYTHON_DIR = "python"  # <definitions>/python/: modules python bindings may name without being allowed
