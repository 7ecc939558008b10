"""The gateway's exceptions, split by who must act on them.

    GatewayError                    base; ``status`` is the HTTP status, ``exit_code`` the CLI's
    ├── DefinitionsInvalid          the YAML (or what it names) is wrong: the admin must act
    ├── ToolError                   a tool call failed in a way the LLM can read and act on;
    │   │                           it becomes a result with ``is_error: true``, never an HTTP error
    │   ├── ArgumentsInvalid        the arguments do not match the tool's input schema
    │   └── ToolTimeout             the tool ran past its ``timeout_s``
    ├── UnknownTool                 no tool has that id (404)
    ├── BadRequest                  malformed request body (400)
    ├── PayloadTooLarge             request body over the limit (413)
    ├── Unauthorized                missing or wrong API key (401)
    ├── Forbidden                   the key may not use that tool or operation (403)
    ├── UnsupportedMediaType        an admin write whose body is not said to be JSON (415)
    ├── server.admin_files.NotFound   no such definitions file (404, the console's editor)
    ├── server.admin_files.Conflict   the file exists, or changed on disk since it was opened (409)
    ├── state.StateUnavailable      the shared state (Redis) cannot be reached (503)
    ├── settings.SettingsInvalid    the settings file or environment is wrong (CLI exit 2)
    ├── loop.ChatUnavailable        no LLM provider configured for the chat endpoint (503)
    └── loop.providers.ProviderError   the LLM provider failed or answered nonsense (502)
        └── ProviderTimeout            it did not answer in time (504)

Protocol and auth failures (the lower branch) are the caller's business and become HTTP or JSON-RPC errors;
``ToolError`` is the model's business and becomes a tool result it can recover from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the definitions, pointing at the node that is wrong."""

    file: str
    line: int
    column: int
    message: str
    severity: str = "error"  # or "warning": reported, but does not stop a catalog from being built

    def __str__(self) -> str:
        prefix = "" if self.severity == "error" else f"{self.severity}: "
        return f"{self.file}:{self.line}:{self.column}: {prefix}{self.message}"

    def as_dict(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "column": self.column,
            "message": self.message,
            "severity": self.severity,
        }


class GatewayError(Exception):
    status = 500
    exit_code = 1


class DefinitionsInvalid(GatewayError):
    """Raised with every problem found, never only the first."""

    def __init__(self, problems: Sequence[Problem]):
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class ToolError(GatewayError):
    """Raise it from a tool to send its message to the LLM as an error result."""

    status = 200
    outcome = "error"  # the call's outcome in events, metrics and the audit trail (gateway.events.CALL_OUTCOMES)


class ConnectionNeeded(ToolError):
    """A call its person must first connect an account for (``gateway.upstream.connections``): ``url`` is where.
    The message says so to every caller; an MCP client that accepts URL-mode elicitation is sent there instead."""

    def __init__(self, message: str, url: str):
        super().__init__(message)
        self.url = url


class ArgumentsInvalid(ToolError):
    outcome = "invalid_arguments"


class ToolTimeout(ToolError):
    outcome = "timeout"


class UnknownTool(GatewayError):
    status = 404

    def __init__(self, tool_id: str, close_matches: Sequence[str] = ()):
        self.tool_id = tool_id
        self.close_matches = tuple(close_matches)
        hint = f" Did you mean: {', '.join(close_matches)}?" if close_matches else ""
        super().__init__(f"Unknown tool '{tool_id}'.{hint}")


class BadRequest(GatewayError):
    status = 400


class PayloadTooLarge(GatewayError):
    status = 413


class Unauthorized(GatewayError):
    status = 401
    challenge: str | None = None  # the WWW-Authenticate value to answer with (RFC 6750); None: plain "Bearer"


class Forbidden(GatewayError):
    status = 403
    challenge: str | None = None  # a step-up's WWW-Authenticate (error="insufficient_scope", the scope needed)


class UnsupportedMediaType(GatewayError):
    status = 415
