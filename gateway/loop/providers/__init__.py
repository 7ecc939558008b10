"""LLM provider clients over httpx, one module per wire format; ``kind`` in the settings picks one."""

from __future__ import annotations

from collections.abc import Callable

import httpx

from ..config import ProviderConfig
from ..messages import ModelReply, ModelRequest, ProviderError, ProviderTimeout, Sleep, ToolCall
from .anthropic import AnthropicProvider
from .base import HttpProvider
from .openai import OpenAIProvider

PROVIDERS: dict[str, type[HttpProvider]] = {"openai": OpenAIProvider, "anthropic": AnthropicProvider}

__all__ = [
    "PROVIDERS",
    "HttpProvider",
    "ModelReply",
    "ModelRequest",
    "ProviderError",
    "ProviderTimeout",
    "ToolCall",
    "make_provider",
]


def make_provider(config: ProviderConfig, http_client: Callable[[], httpx.AsyncClient], **options: Sleep) -> HttpProvider:
    """The client for ``config.kind``; ``options`` may replace ``sleep`` (the wait between retries)."""
    return PROVIDERS[config.kind](config, http_client, **options)
