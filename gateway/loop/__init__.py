"""The gateway's own LLM loop: providers over httpx, the tool loop, its trace (see loop.py for the algorithm)."""

from .config import ChatConfig, LoopConfig, ProviderConfig, load_loop_config
from .loop import ChatLoop, ChatUnavailable, Executed, Finished, TextDelta, Turn
from .messages import ModelReply, ModelRequest, ProviderError, ProviderTimeout, ToolCall
from .request import ChatRequest, parse_chat_request
from .trace import ToolExecution

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
