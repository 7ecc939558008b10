"""Which tools a chat request offers the model, and where each of them runs.

A gateway tool is offered when every one of these holds (LangChain4j's ToolProvider, made declarative):

- it is in the request's toolsets / tags (``gateway.toolsets``/``tags``; default ``chat.toolsets``/``tags``);
- it is in the allowlists: the settings' ``chat.tools`` and the request's ``gateway.tools``, where given;
- the caller's API key may use it;
- its ``offer`` rule, if any, holds for the latest user message: ``when_message_matches`` (a regular
  expression in RE2 syntax, searched) or ``when_message_mentions`` (any of the words, as the start of a word,
  ignoring case), both matched in linear time over the message's first characters (``gateway.definitions.offer_rules``);
- it can be declared in the provider's format (a schema the format cannot express leaves it out);
- with ``tool_selection: {search: ...}``, it is among the best for the conversation, pinned, or its offer rule
  matched (``gateway.loop.selection``).

Scope decides the side: ``client`` tools, and ``all`` tools when the request asks ``gateway.side: client``, are
handed back to the caller; the rest run in the gateway. Functions the caller declares in ``tools`` are always
the caller's to run.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..catalog.snapshot import Catalog, Tool
from ..definitions.model import Scope
from ..definitions.offer_rules import rule_holds, rule_patterns
from ..formats import render_tools
from .config import ChatConfig
from .request import ChatRequest, InvalidRequest
from .selection import Selection

log = logging.getLogger("gateway.loop")


class MayUse(Protocol):
    def may_use(self, tool: Tool) -> bool: ...


@dataclass(frozen=True)
class Offered:
    tool: Tool
    side: str  # "server" or "client"
    declaration: dict[str, Any]


@dataclass(frozen=True)
class Offer:
    tools: Mapping[str, Offered]  # by the name the model calls (the tool id)
    caller_tools: Mapping[str, dict[str, Any]]  # declarations in the provider's format, by name
    why: Mapping[str, str] | None = None  # each gateway tool's reason, where tools were selected (else None)

    def reasons(self) -> tuple[dict[str, str], ...] | None:
        """The response's ``tools_offered`` where tools were selected: each gateway tool offered, and why."""
        if self.why is None:
            return None
        return tuple({"tool": name, "why": self.why[name]} for name in self.tools)

    @property
    def names(self) -> list[str]:
        return [*self.tools, *self.caller_tools]

    def declarations(self, exclude: set[str] = frozenset()) -> list[dict[str, Any]]:
        return [o.declaration for name, o in self.tools.items() if name not in exclude] + \
            [d for name, d in self.caller_tools.items() if name not in exclude]


def choose_tools(catalog: Catalog, request: ChatRequest, chat: ChatConfig, tool_format: str,
                 caller_tool: Any, caller: MayUse | None = None) -> Offer:
    """The tools ``request`` offers; ``caller_tool`` turns a caller's OpenAI function into ``tool_format``."""
    allowed = _allowlist(chat.tools, request.tools)
    candidates = catalog.select(
        toolsets=request.toolsets if request.toolsets is not None else chat.toolsets,
        tags=request.tags if request.tags is not None else chat.tags,
        ids=allowed,
    )
    message = request.latest_user_text
    chosen = [t for t in candidates if (caller is None or caller.may_use(t)) and offered_for(t, message)]
    selection = request.tool_selection if request.tool_selection is not None else chat.tool_selection
    why: dict[str, str] | None = None
    if isinstance(selection, Selection):
        chosen, why = _selected(catalog, chosen, request.conversation_text, selection, chat.dense_search)
    rendered = {}
    for tool in chosen:
        one = render_tools([tool], tool_format)
        if one.tools:
            rendered[tool.id] = Offered(tool, _side(tool, request.client_side), one.tools[0])
        else:
            log.debug("not offering %s: %s", tool.id, "; ".join(one.diagnostics))
    caller_tools = {}
    for spec in request.caller_tools:
        name = spec["function"]["name"]
        if name in rendered:
            raise InvalidRequest(f"tools: the function '{name}' has the name of a gateway tool; rename it.", "tools")
        caller_tools[name] = caller_tool(spec)
    offer = Offer(rendered, caller_tools, why)
    _check_choice(request.tool_choice, offer)
    return offer


def _selected(catalog: Catalog, chosen: list[Tool], conversation: str, selection: Selection,
              dense: bool) -> tuple[list[Tool], dict[str, str]]:
    """Of ``chosen``, what ``selection`` offers, in catalog order, and why each: the ``always`` ones, those whose
    own offer rule matched, those of no toolset left to search (when ``selection.toolsets`` names some), and the
    best ``k`` of the rest for the conversation (``gateway.search``; its index made by ``ChatLoop.turn`` before,
    off the event loop)."""
    from ..search.index import index_of  # numpy: imported by the first search, not when the loop is

    why = {t.id: "always" for t in chosen if t.id in selection.always}
    why |= {t.id: "offer rule" for t in chosen if t.definition.offer and t.id not in why}
    if searched := set(selection.toolsets):
        why |= {t.id: "not searched" for t in chosen if t.id not in why and not searched & set(t.definition.toolsets)}
    rest = frozenset(t.id for t in chosen if t.id not in why)
    if rest:
        found = index_of(catalog, dense).search(conversation, selection.k, ("chat", rest),
                                                lambda tool: tool.id in rest)
        why |= {hit.tool.id: f"search {hit.score:.3f}" for hit in found}
    return [t for t in chosen if t.id in why], why


def offered_for(tool: Tool, message: str) -> bool:
    """Whether the tool's ``offer`` rule holds for the user's latest message (no rule: always)."""
    rule = tool.definition.offer
    if not rule:
        return True
    return rule_holds(tool.memo("offer", lambda: rule_patterns(rule)), message)


def _allowlist(configured: tuple[str, ...] | None, requested: tuple[str, ...] | None) -> set[str] | None:
    if configured is None:
        return None if requested is None else set(requested)
    return set(configured) if requested is None else set(configured) & set(requested)


def _side(tool: Tool, client_side: bool) -> str:
    if tool.scope is Scope.CLIENT or (tool.scope is Scope.ALL and client_side):
        return "client"
    return "server"


def _check_choice(choice: Any, offer: Offer) -> None:
    if isinstance(choice, Mapping):
        name = choice["function"]["name"]
        if name not in offer.tools and name not in offer.caller_tools:
            raise InvalidRequest(f"tool_choice names '{name}', which this request does not offer "
                                 f"(offered: {', '.join(offer.names) or 'none'}).", "tool_choice")
