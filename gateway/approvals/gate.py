"""The check ``invoke`` runs before a tool's filters and binding: the call goes on only with an approval of this
tool, these arguments and this caller (``gateway.approvals``); else it is asked, waited for, or told pending."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import TYPE_CHECKING, Any

from ..client_channel import ClientCannotAnswer, QuestionAsked
from ..errors import ToolError
from ..schema.published import compile_validator
from .config import Approval, required
from .records import APPROVED, DENIED, PENDING, Approvals, Request, TooManyOpen, call_digest

if TYPE_CHECKING:
    from ..catalog.snapshot import Catalog, Tool
    from ..context import CallContext
    from ..events import EventBus

log = logging.getLogger("gateway.approvals")

POLL_S = 0.25  # how often a waiting call reads the shared state for a decision (a bounded wait, not a queue)
SHOWN_ARGUMENTS = 2000  # characters of the arguments an elicitation shows; longer ones are not asked in-band
MAX_ARGUMENT_BYTES = 16384  # arguments of a call that asks for an approval (each request keeps them)


class ApprovalPending(ToolError):
    outcome = "approval_pending"

    def __init__(self, message: str, approval: dict[str, Any]):
        super().__init__(message)
        self.approval = approval


class ApprovalDenied(ToolError):
    outcome = "approval_denied"


class ApprovalRefused(ToolError):
    outcome = "rejected"  # refused before it ran, as a rate limit refuses


def needs_approval(tool: Tool, catalog: Catalog) -> bool:
    """Whether calls of ``tool`` need an approval (some of them, with a ``when``)."""
    return _needed(tool, catalog)[0] is not None


async def gate(catalog: Catalog, tool: Tool, arguments: dict[str, Any], context: CallContext) -> None:
    """Return when the call may run; raise ``ApprovalPending`` or ``ApprovalDenied`` when it may not."""
    approval, when = _needed(tool, catalog)
    if approval is None or (when is not None and not _matches(when, arguments)):
        return
    approvals = Approvals(catalog.state, catalog.settings.approvals.ttl_s)
    digest = call_digest(tool.id, arguments, context.caller, context.user)
    request = await approvals.of_call(digest)
    if request is not None and request.status == APPROVED:
        if await approvals.use(request):
            tell(catalog.events, "used", request, context.caller)
            return
        request = None  # another call took it meanwhile: this one asks anew
    if request is not None and request.status == DENIED:
        await approvals.forget(request)
        raise ApprovalDenied(_denied(tool, request))
    if request is None:
        size = len(json.dumps(arguments, ensure_ascii=False, default=str).encode())
        if size > MAX_ARGUMENT_BYTES:  # an approver must read what they approve; a request is kept in the state
            raise ApprovalRefused(f"Tool '{tool.id}' needs a person's approval, and its arguments are too large to "
                                  f"be shown to one ({size} bytes; at most {MAX_ARGUMENT_BYTES}).")
        shown = arguments if tool.definition.audit_arguments else None
        try:
            request = await approvals.open(tool.id, digest, shown, context.caller, context.user, approval.reason,
                                           list(approval.approvers))
        except TooManyOpen as exc:
            raise ApprovalRefused(f"Tool '{tool.id}' needs a person's approval, and none was asked for: {exc}.") \
                from None
        tell(catalog.events, "requested", request, context.caller)
    if "caller" in approval.approvers:
        # A user who never answers holds the call no longer than the tool may run, or than it would wait anyway.
        asking_s = max(approval.timeout_s, tool.definition.timeout_s or catalog.settings.default_timeout_s)
        answer = await _ask_caller(context, tool, arguments, approval, asking_s, request.id)
        if answer is not None and await approvals.decide(request, answer, context.caller, "elicitation"):
            tell(catalog.events, "approved" if answer else "denied", request, context.caller)
    if approval.timeout_s > 0 or "caller" in approval.approvers:
        request = await _decided(approvals, request, approval.timeout_s)
    if request.status == APPROVED and await approvals.use(request):
        tell(catalog.events, "used", request, context.caller)
        return
    if request.status == DENIED:
        await approvals.forget(request)
        raise ApprovalDenied(_denied(tool, request))
    raise ApprovalPending(
        f"Tool '{tool.id}' needs a person's approval before it runs (approval {request.id}, pending until "
        f"{time.strftime('%H:%M:%S UTC', time.gmtime(request.expires_at))}). Once an approver approves it, the same "
        "call with the same arguments runs once.",
        {"id": request.id, "status": PENDING, "expires_at": request.expires_at, "url": f"/approvals/{request.id}"})


def _needed(tool: Tool, catalog: Catalog) -> tuple[Approval | None, Any]:
    """The approval ``tool`` needs and its ``when`` compiled, once per tool (and setting)."""
    def compute() -> tuple[Approval | None, Any]:
        own = required(tool.definition, catalog.settings.approvals)
        return own, (compile_validator(own.when) if own is not None and own.when is not None else None)

    return tool.memo(("approval", catalog.settings.approvals.destructive), compute)


def _matches(when: Any, arguments: dict[str, Any]) -> bool:
    """Whether the arguments match the approval's ``when``; a ``when`` that cannot be checked (an override's, which
    no build checked) needs the approval: closed, not open."""
    try:
        return bool(when.is_valid(arguments))
    except Exception:  # any failure of the schema itself
        log.warning("approval.when could not be checked; the approval is asked for", exc_info=True)
        return True


async def _ask_caller(context: CallContext, tool: Tool, arguments: dict[str, Any], approval: Approval,
                      asking_s: float, approval_id: str) -> bool | None:
    """The calling client's user's answer (form elicitation) within ``asking_s``: True approves, False denies,
    None when the client cannot ask, its user dismissed the question, did not answer in time, or answered
    another question (the answer names this approval: one sent for a question never asked is none).

    Every argument is shown, in ASCII (no bidirectional or invisible character can hide part of it): arguments too
    long to show whole are not asked in-band — the approver reads them out of band."""
    shown = json.dumps(arguments, ensure_ascii=True, sort_keys=True, default=str)
    if len(shown) > SHOWN_ARGUMENTS:
        return None
    field = f"approve_{approval_id}"
    reason = f" Why it needs one: {approval.reason}" if approval.reason else ""
    try:
        async with asyncio.timeout(asking_s):
            answer = await context.client.elicit(
                f"Tool '{tool.id}' ({tool.definition.name}) asks to run with these arguments: {shown}.{reason} "
                "Run it once?",
                {"type": "object", "required": [field],
                 "properties": {field: {"type": "boolean", "title": "Run it once",
                                        "description": f"Run {tool.id} with exactly these arguments"}}})
    except ClientCannotAnswer:
        return None
    except QuestionAsked:  # this round ends with the question; the call comes back with the answer
        raise
    except TimeoutError:
        log.info("approval of %s: the calling client's user did not answer within %g s", tool.id, asking_s)
        return None
    except ToolError as exc:  # the client went away, or answered something else: asked out of band instead
        log.info("approval of %s: the calling client did not answer (%s)", tool.id, exc)
        return None
    if answer.get("action") == "decline":
        return False
    if answer.get("action") != "accept":
        return None
    content = answer.get("content")
    if not isinstance(content, dict) or not isinstance(content.get(field), bool):
        return None
    return content[field]


async def _decided(approvals: Approvals, request: Request, timeout_s: float) -> Request:
    """``request`` as it stands once decided, or after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        current = await approvals.get(request.id)
        if current is None or current.status != PENDING:
            return current or request
        if time.monotonic() >= deadline:
            return current
        await asyncio.sleep(POLL_S)


def _denied(tool: Tool, request: Request) -> str:
    return f"Tool '{tool.id}' was not approved ({request.by or 'an approver'} denied approval {request.id}); it did " \
           "not run."


def tell(events: EventBus, action: str, request: Request, caller: str | None) -> None:
    """The ``approval`` event of ``action`` on ``request`` (the audit trail, the metrics, the webhook hear it)."""
    events.emit("approval", action=action, caller=caller,
                detail={"id": request.id, "tool": request.tool, "by": request.by, "via": request.via,
                        "call_sha256": request.digest, "reason": request.reason, "expires_at": request.expires_at})
