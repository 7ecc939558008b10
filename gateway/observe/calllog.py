"""The call log: one INFO line per tool call, when it ends, on the logger ``gateway.calls``.

The line carries the call id (the ``ref`` of an internal error names it), the tool, surface, caller, user,
outcome, duration and result size, and the trace id with tracing on. In JSON logs these are also fields of the
line's object. Raising that logger's level past INFO (or ``log_level: warning``) makes it cost one level check
per call.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from .. import secrets
from ..events import Activity, CallActivity, Observer
from .logs import CallIds, JsonFormatter, TextFormatter, quiet_clients

if TYPE_CHECKING:
    from ..runtime.gateway import Gateway

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
        if activity.trace_id:
            message, args = MESSAGE + ", trace %s", (*args, activity.trace_id)
        else:
            message = MESSAGE
        handler = _plain_handler()
        if handler is None:
            # current_call is reset when the call ends: the ids come with the record, not from the CallIds filter.
            log.info(message, *args, extra={"call_id": activity.id, "trace_id": activity.trace_id, "fields": fields})
            return
        text = message % args
        known = secrets.known_values()
        if known:  # what gateway.secrets does to every record as it is made
            text = secrets.redact(text, known)
        line = handler.formatter.line(time.time(), "INFO", log.name, text, activity.id, activity.trace_id, fields)
        stream = handler.stream
        handler.acquire()  # as Handler.handle does: lines of several threads do not interleave
        try:
            stream.write(line + handler.terminator)
            stream.flush()  # what StreamHandler.flush does, under the lock held here
        except RecursionError:
            raise
        except Exception:  # noqa: BLE001 — reported as logging reports a failed write, then the call goes on
            handler.handleError(log.makeRecord(log.name, logging.INFO, "", 0, text, (), None))
        finally:
            handler.release()


def _plain_handler() -> logging.StreamHandler | None:
    """The handler ``configure_logging`` installed when it alone writes this logger's lines, with nothing between
    (no other handler, filter or record factory that would see the record): then the call log writes the line that
    handler would write, without making a record (~3x cheaper). Anything else gets a record, as logging makes it.
    (``quiet_clients``, on that handler unless ``log_level`` is debug, lets every call-log line through.)"""
    factory = logging.getLogRecordFactory()  # logging's, or gateway.secrets' that redacts (done here instead)
    if log.filters or factory is not logging.LogRecord and getattr(factory, "__module__", None) != secrets.__name__:
        return None
    found = None
    logger: logging.Logger | None = log
    while logger is not None:
        for handler in logger.handlers:
            if found is not None:
                return None
            found = handler
        logger = logger.parent if logger.propagate else None
    if (type(found) is not logging.StreamHandler or found.level > logging.INFO
            or type(found.formatter) not in _FORMATTERS or any(type(f) is not CallIds and f is not quiet_clients for f in found.filters)):
        return None
    return found


_FORMATTERS = (JsonFormatter, TextFormatter)


def make(gateway: Gateway) -> CallLog:
    return CallLog()
