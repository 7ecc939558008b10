"""The HTTP server: REST, MCP and the demo API in one Starlette app (``create_app``), run by ``serve``."""

from .app import create_app, serve

__all__ = ["create_app", "serve"]
