"""What an approval requires, as declared: a tool's ``approval:`` (``required``, or a mapping) and the
``approvals:`` setting.

``approval: {approvers: [...], timeout_s: N, when: {JSON Schema}, reason: "..."}``:

- ``approvers``: ``admins`` (any admin key or admin person), ``key:<name>`` (that API key), ``user:<sub>`` (that
  OAuth person), ``caller`` (the calling client's user, asked through the client: MCP elicitation — which trusts
  the client software to ask a person); default ``[admins]``;
- ``timeout_s``: how long the call waits for a decision before it returns pending (default 0, at most 600);
- ``when``: a JSON Schema; the approval is needed only for arguments that match it ("amount over 100");
- ``reason``: shown to the approver.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

# Not the caller by default: its "yes" comes from the calling client software, which an agent holding the
# caller's key can be.
DEFAULT_APPROVERS = ("admins",)
SETTING_KEYS = ("destructive", "ttl_s", "webhook")


@dataclass(frozen=True)
class ApprovalSettings:
    """The ``approvals`` setting: ``destructive``: every tool annotated ``destructive: true`` needs one (with the
    default approvers) unless its own ``approval:`` says how; ``ttl_s``: how long a request, and an approval not
    yet used, live; ``webhook``: an http(s) URL POSTed each new request (never its arguments)."""

    destructive: bool = False
    ttl_s: float = 900.0
    webhook: str = ""  # told of each new request (gateway.observe.approval_hook); "" none


@dataclass(frozen=True)
class Approval:
    approvers: tuple[str, ...] = DEFAULT_APPROVERS
    timeout_s: float = 0.0
    when: Mapping[str, Any] | None = None
    reason: str = ""


REQUIRED = Approval()


def declared(raw: Any) -> Approval | None:
    """The ``Approval`` of a schema-checked ``approval:`` value (None: not given)."""
    if raw is None:
        return None
    if raw == "required":
        return REQUIRED
    return Approval(tuple(raw.get("approvers") or DEFAULT_APPROVERS), float(raw.get("timeout_s", 0.0)),
                    raw.get("when"), str(raw.get("reason", "")))


def required(definition: Any, settings: ApprovalSettings) -> Approval | None:
    """The approval calls of ``definition`` (a ``ToolDefinition``) need: its own ``approval:``, else the
    setting's for a tool annotated destructive; None: none."""
    approval = declared(definition.approval)
    if approval is None and settings.destructive and definition.annotations.get("destructive"):
        return REQUIRED
    return approval


def asks_caller(definition: Any, settings: ApprovalSettings) -> bool:
    """Whether calls of ``definition`` may ask their caller for approval: then an MCP call is answered as a
    stream, on which the question can go."""
    approval = required(definition, settings)
    return approval is not None and "caller" in approval.approvers
