"""The chat loop's settings: ``providers`` (the LLMs it talks to) and ``chat`` (its limits and default tools).

``Settings.providers`` and ``Settings.chat`` arrive as raw mappings from the settings file; this module checks
them strictly (unknown keys, wrong types and impossible values are refused with the setting's dotted path) and
turns them into frozen dataclasses. Example::

    providers:
      default:
        kind: openai                     # openai (any Chat Completions server) | anthropic
        base_url: https://api.openai.com/v1
        model: gpt-4o-mini
        api_key: "{{ secrets.OPENAI_API_KEY }}"   # resolved from the environment at call time
        timeout_s: 60
        max_retries: 2
        # also: headers, query (e.g. Azure's api-key and api-version), max_tokens, params, strict_tools
    chat:
      provider: default
      max_round_trips: 8
      max_parallel_tools: 8
      toolsets: [math, time]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from .. import secrets
from ..settings import Settings, SettingsInvalid
from .selection import ALL, Selection, parse_selection

if TYPE_CHECKING:
    from ..templates.compile import Template

DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
_PROVIDER_KEYS = {"kind", "base_url", "model", "api_key", "timeout_s", "max_retries", "headers", "query",
                  "max_tokens", "params", "strict_tools"}
_CHAT_KEYS = {"provider", "max_round_trips", "max_parallel_tools", "toolsets", "tags", "tools", "tool_selection"}


@dataclass(frozen=True)
class ProviderConfig:
    name: str
    kind: str
    base_url: str
    model: str
    # May hold ``{{ secrets.NAME }}`` references; rendered per call (gateway.loop.secrets), never logged.
    api_key: Template | None = None
    timeout_s: float = 60.0
    max_retries: int = 2
    # Extra headers (templated like api_key; e.g. Azure's ``api-key``) and query parameters (``api-version``).
    headers: Mapping[str, Template] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)
    # Anthropic requires max_tokens on every request; used when the caller gives none.
    max_tokens: int = 4096
    # Default request parameters (temperature, ...) the caller's own values override.
    params: Mapping[str, Any] = field(default_factory=dict)
    # OpenAI only: declare tools in strict mode (the model's arguments then always match the schema).
    strict_tools: bool = False


@dataclass(frozen=True)
class ChatConfig:
    provider: str | None = None
    max_round_trips: int = 8
    max_parallel_tools: int = 8
    # The tools offered when a request names none: toolsets, tags, and an allowlist of ids (None = no allowlist).
    toolsets: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    tools: tuple[str, ...] | None = None
    # Which of those tools each turn offers: every one ("all"), or the best for the conversation (gateway.loop.selection).
    tool_selection: Selection | str = ALL
    dense_search: bool = False  # the tool_search.dense setting: the selection fuses BM25 with a dense model


@dataclass(frozen=True)
class LoopConfig:
    providers: Mapping[str, ProviderConfig]
    chat: ChatConfig

    @property
    def default_provider(self) -> str | None:
        return self.chat.provider


def load_loop_config(settings: Settings) -> LoopConfig:
    """Check ``settings.providers`` and ``settings.chat``; raise ``SettingsInvalid`` naming every bad setting."""
    problems: list[str] = []
    providers: dict[str, ProviderConfig] = {}
    raw_providers = settings.providers
    if not isinstance(raw_providers, Mapping):
        problems.append(f"providers: expected a mapping of provider name to settings, got {_kind(raw_providers)}")
        raw_providers = {}
    for name, raw in raw_providers.items():
        provider = _provider(str(name), raw, problems)
        if provider is not None:
            providers[str(name)] = provider
            problems += _refused_secrets(provider, settings)
    chat = replace(_chat(settings.chat, providers, problems), dense_search=settings.tool_search.dense)
    if problems:
        raise SettingsInvalid("invalid chat settings:\n" + "\n".join(f"- {p}" for p in problems))
    return LoopConfig(MappingProxyType(providers), chat)


def _provider(name: str, raw: Any, problems: list[str]) -> ProviderConfig | None:
    where = f"providers.{name}"
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: expected a mapping, got {_kind(raw)}")
        return None
    before = len(problems)
    _unknown(where, raw, _PROVIDER_KEYS, problems)
    kind = raw.get("kind")
    if kind not in DEFAULT_BASE_URLS:
        problems.append(f"{where}.kind: expected one of {', '.join(map(repr, DEFAULT_BASE_URLS))}, got {kind!r}")
        return None
    base_url = raw.get("base_url", DEFAULT_BASE_URLS[kind])
    parts = urlsplit(base_url) if isinstance(base_url, str) else None
    if parts is None or parts.scheme not in ("http", "https") or not parts.netloc:
        problems.append(f"{where}.base_url: expected an http(s) URL, got {base_url!r}")
    model = raw.get("model")
    if not isinstance(model, str) or not model:
        problems.append(f"{where}.model: required, the model name the provider knows (e.g. 'gpt-4o-mini')")
    api_key = raw.get("api_key")
    if api_key is not None and not isinstance(api_key, str):
        problems.append(f"{where}.api_key: expected a string such as '{{{{ secrets.OPENAI_API_KEY }}}}'")
        api_key = None
    api_key = _template(f"{where}.api_key", api_key, problems) if api_key is not None else None
    timeout_s = _number(f"{where}.timeout_s", raw.get("timeout_s", 60.0), problems, minimum=0.001)
    max_retries = _integer(f"{where}.max_retries", raw.get("max_retries", 2), problems, minimum=0)
    max_tokens = _integer(f"{where}.max_tokens", raw.get("max_tokens", 4096), problems, minimum=1)
    headers = {name: _template(f"{where}.headers.{name}", value, problems)
               for name, value in _strings(f"{where}.headers", raw.get("headers", {}), problems).items()}
    query = _strings(f"{where}.query", raw.get("query", {}), problems)
    params = raw.get("params", {})
    if not isinstance(params, Mapping):
        problems.append(f"{where}.params: expected a mapping of request parameters, got {_kind(params)}")
    strict_tools = raw.get("strict_tools", False)
    if strict_tools not in (True, False) or (strict_tools and kind != "openai"):
        problems.append(f"{where}.strict_tools: expected true or false, and true only for kind openai")
    if len(problems) > before:
        return None
    return ProviderConfig(
        name=name, kind=kind, base_url=base_url.rstrip("/"), model=model, api_key=api_key, timeout_s=timeout_s,
        max_retries=max_retries, headers=MappingProxyType(headers), query=MappingProxyType(query),
        max_tokens=max_tokens, params=MappingProxyType(dict(params)), strict_tools=strict_tools,
    )


def _chat(raw: Any, providers: Mapping[str, ProviderConfig], problems: list[str]) -> ChatConfig:
    if not isinstance(raw, Mapping):
        problems.append(f"chat: expected a mapping, got {_kind(raw)}")
        return ChatConfig()
    _unknown("chat", raw, _CHAT_KEYS, problems)
    provider = raw.get("provider")
    if provider is None:
        # One provider needs no naming; with several, 'default' is the conventional choice.
        provider = next(iter(providers)) if len(providers) == 1 else ("default" if "default" in providers else None)
    elif provider not in providers:
        known = ", ".join(providers) or "none configured"
        problems.append(f"chat.provider: no provider named {provider!r} (providers: {known})")
    tools = raw.get("tools")
    try:
        selection = parse_selection(raw.get("tool_selection", ALL), "chat.tool_selection")
    except ValueError as exc:
        problems.append(str(exc))
        selection = ALL
    return ChatConfig(
        provider=provider,
        max_round_trips=_integer("chat.max_round_trips", raw.get("max_round_trips", 8), problems, minimum=1),
        max_parallel_tools=_integer("chat.max_parallel_tools", raw.get("max_parallel_tools", 8), problems, minimum=1),
        toolsets=_names("chat.toolsets", raw.get("toolsets", ()), problems),
        tags=_names("chat.tags", raw.get("tags", ()), problems),
        tools=None if tools is None else _names("chat.tools", tools, problems),
        tool_selection=selection,
    )


def _unknown(where: str, raw: Mapping[str, Any], known: set[str], problems: list[str]) -> None:
    unknown = sorted(set(map(str, raw)) - known)
    if unknown:
        problems.append(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")


def _refused_secrets(provider: ProviderConfig, settings: Settings) -> list[str]:
    """Provider keys obey the one rule for ``{{ secrets.NAME }}`` that definitions obey (``secrets.refusal``)."""
    where = f"providers.{provider.name}"
    templates = {"api_key": provider.api_key} if provider.api_key is not None else {}
    templates.update({f"headers.{name}": template for name, template in provider.headers.items()})
    return [f"{where}.{field_name}: {reason}" for field_name, template in templates.items()
            for name in sorted(template.references.secrets)
            if (reason := secrets.refusal(name, settings)) is not None]


def _template(where: str, source: str, problems: list[str]) -> Template:
    # Imported by the first provider key or header: without a provider, serving needs no Jinja2 of the loop's.
    from ..templates.compile import TemplateInvalid, compile_template

    try:
        return compile_template(source, {"secrets"})
    except TemplateInvalid as exc:
        problems.append(f"{where}: {exc}")
        return compile_template("")


def _number(where: str, value: Any, problems: list[str], *, minimum: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        problems.append(f"{where}: expected a number of at least {minimum:g}, got {value!r}")
        return minimum
    return float(value)


def _integer(where: str, value: Any, problems: list[str], *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        problems.append(f"{where}: expected an integer of at least {minimum}, got {value!r}")
        return minimum
    return value


def _strings(where: str, value: Any, problems: list[str]) -> dict[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(v, str) for v in value.values()):
        problems.append(f"{where}: expected a mapping of names to strings")
        return {}
    return {str(k): v for k, v in value.items()}


def _names(where: str, value: Any, problems: list[str]) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        problems.append(f"{where}: expected a list of names, got {value!r}")
        return ()
    return tuple(value)


def _kind(value: Any) -> str:
    return type(value).__name__
