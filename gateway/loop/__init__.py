"""The gateway's own LLM loop: providers over httpx, the tool loop, its trace (see loop.py for the algorithm).

The names below are imported from their modules on first use (PEP 562): importing one module of the loop (the
chat surface's settings check, ``gateway.loop.config``; the OpenAPI document's ``gateway.loop.request``) does not
import the rest, so a gateway that serves no chat does not pay for the loop at start-up.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .config import ChatConfig, LoopConfig, ProviderConfig, load_loop_config
    from .loop import ChatLoop, ChatUnavailable, Executed, Finished, TextDelta, Turn
    from .messages import ModelReply, ModelRequest, ProviderError, ProviderTimeout, ToolCall
    from .request import ChatRequest, parse_chat_request
    from .trace import ToolExecution

# name -> the module of this package that defines it
_HOMES = {
    "ChatConfig": "config", "LoopConfig": "config", "ProviderConfig": "config", "load_loop_config": "config",
    "ChatLoop": "loop", "ChatUnavailable": "loop", "Executed": "loop", "Finished": "loop", "TextDelta": "loop",
    "Turn": "loop",
    "ModelReply": "messages", "ModelRequest": "messages", "ProviderError": "messages", "ProviderTimeout": "messages",
    "ToolCall": "messages",
    "ChatRequest": "request", "parse_chat_request": "request",
    "ToolExecution": "trace",
}

__all__ = [
    "ChatConfig",
    "ChatLoop",
    "ChatRequest",
    "ChatUnavailable",
    "Executed",
    "Finished",
    "LoopConfig",
    "ModelReply",
    "ModelRequest",
    "ProviderConfig",
    "ProviderError",
    "ProviderTimeout",
    "TextDelta",
    "ToolCall",
    "ToolExecution",
    "Turn",
    "load_loop_config",
    "parse_chat_request",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = globals()[name] = getattr(import_module(f".{home}", __name__), name)  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
