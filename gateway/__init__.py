"""A declarative tool gateway for LLMs: tools declared in YAML, served over MCP, REST and provider formats."""

# The release, written once: pyproject.toml reads it (hatch), and the server names it without asking
# importlib.metadata, which searches every sys.path entry (~70 ms of a warm restart with 300 packages installed).
__version__ = "0.1.0"

from .catalog.build import build_catalog
from .catalog.snapshot import Catalog, Tool
from .context import CallContext
from .definitions.load import Definitions, load_definitions
from .definitions.model import Scope, ToolDefinition
from .errors import (
    ArgumentsInvalid,
    DefinitionsInvalid,
    GatewayError,
    Problem,
    ToolError,
    ToolTimeout,
    UnknownTool,
)
from .filters.call import FilterCall
from .invoke import invoke
from .results import ToolResult
from .settings import Settings, load_settings

__all__ = [
    "ArgumentsInvalid",
    "CallContext",
    "Catalog",
    "Definitions",
    "DefinitionsInvalid",
    "FilterCall",
    "GatewayError",
    "Problem",
    "Scope",
    "Settings",
    "Tool",
    "ToolDefinition",
    "ToolError",
    "ToolResult",
    "ToolTimeout",
    "UnknownTool",
    "build_catalog",
    "invoke",
    "load_definitions",
    "load_settings",
]
