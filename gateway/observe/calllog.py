"""The call log: one INFO line per tool call, when it ends, on the logger ``gateway.calls``.

The line carries the call id (the ``ref`` of an internal error names it), the tool, surface, caller, user,
outcome, duration and result size, and the trace id with tracing on. In JSON logs these are also fields of the
line's object. Raising that logger's level past INFO (or ``log_level: warning``) makes it cost one level check
per call.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..events import Activity, CallActivity, Observer

if TYPE_CHECKING:
    from ..runtime import Gateway

log = logging.getLogger("gateway.calls")
MESSAGE = "%s via %s by %s (user %s): %s in %.1f ms, %d chars"


class CallLog(Observer):
    def end(self, activity: Activity) -> None:
        if not isinstance(activity, CallActivity) or not log.isEnabledFor(logging.INFO):
            return
        duration_ms = round(activity.duration_s * 1000, 1)
        fields = {"tool": activity.tool, "surface": activity.surface, "caller": activity.caller,
                  "user": activity.user, "outcome": activity.outcome, "duration_ms": duration_ms,
                  "result_chars": activity.result_chars}
        args = (activity.tool, activity.surface or "-", activity.caller or "-", activity.user or "-",
                activity.outcome, duration_ms, activity.result_chars)
        # current_call is reset when the call ends: the ids come with the record, not from the CallIds filter.
        extra = {"call_id": activity.id, "trace_id": activity.trace_id, "fields": fields}
        if activity.trace_id:
            log.info(MESSAGE + ", trace %s", *args, activity.trace_id, extra=extra)
        else:
            log.info(MESSAGE, *args, extra=extra)


def make(gateway: Gateway) -> CallLog:
    return CallLog()
