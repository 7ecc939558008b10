"""The process's log lines: ``log_format: text`` (as people read them) or ``json`` (one object per line).

``configure_logging(settings)`` puts one handler on the root logger, which every logger of the process reaches
(the gateway's, httpx's and, since ``serve`` gives uvicorn no logging configuration of its own, uvicorn's). A
line logged inside a tool call names the call (``CallIds`` reads ``gateway.events.current_call``): the same id an
internal error's ``ref`` gives and the audit trail records; with tracing on, the trace id too.

Secrets are redacted before a line gets here: ``gateway.secrets`` redacts every log record as it is created,
whichever logger makes it. What this module adds to a line beyond the record's message (the structured
``fields`` a record carries, such as the call log's) is redacted here with the same function.
"""

from __future__ import annotations

import json
import logging
import re
import time
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import orjson

from .. import secrets
from ..events import current_call

if TYPE_CHECKING:
    from ..settings import Settings

# Made once (json.dumps with options makes an encoder per call). ASCII: a line is ASCII whatever the stream's
# encoding, and a lone surrogate cannot break it. Compact, as orjson writes (``encoded``).
_ENCODER = json.JSONEncoder(default=str, separators=(",", ":"))
# Types orjson would write its own way (a datetime as ISO text): handed to ``default`` (str), as json does.
_ORJSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
TEXT_IN_CALL = "%(asctime)s %(levelname)s %(name)s [call %(call_id)s]: %(message)s"


def configure_logging(settings: Settings) -> None:
    """Log lines of every logger to standard error at ``log_level``, in ``log_format``."""
    handler = logging.StreamHandler()
    handler.addFilter(CallIds())
    if settings.log_level != "debug":
        handler.addFilter(quiet_clients)
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else TextFormatter())
    logging.basicConfig(level=settings.log_level.upper(), handlers=[handler], force=True)
    # Neither format shows where a line was logged from, nor the thread or process: not gathered for each record
    # (the logging HOWTO's "Optimization"), which makes a line (the call log's, once per call) ~30% cheaper.
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None
    # The MCP SDK says "Terminating session" at INFO for every request a replica serves from a session record
    # (gateway.server.mcp.sessions): noise at that rate.
    logging.getLogger("mcp.server.streamable_http").setLevel(logging.WARNING)


def quiet_clients(record: logging.LogRecord) -> bool:
    """Drops the INFO lines of httpx and of the MCP SDK's fork of it (``httpx2``): "HTTP Request: …" for every
    request, that is each upstream session's ping every 10 s, each federated call, each OAuth exchange. The call
    log has the calls; at ``log_level: debug`` the lines are kept, for whoever is tracing an upstream."""
    return record.levelno > logging.INFO or record.name not in ("httpx", "httpx2")


class CallIds(logging.Filter):
    """Gives each record ``call_id`` and ``trace_id``: those of the call it was logged in (None outside calls),
    unless the record brought its own (the call log, written when the call has ended)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "call_id"):
            call = current_call.get()
            record.call_id = call.id if call is not None else None
            record.trace_id = call.trace_id if call is not None else None
        return True


class TextFormatter(logging.Formatter):
    """``time LEVEL logger: message``, with ``[call <id>]`` after the logger inside a call."""

    def __init__(self) -> None:
        super().__init__(TEXT)
        self._in_call = logging.PercentStyle(TEXT_IN_CALL)

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escaped(record.message)
        style = self._in_call if getattr(record, "call_id", None) else self._style
        return style.format(record)

    def formatTime(self, record: logging.LogRecord, datefmt: str | None = None) -> str:
        return local_time(record.created) if datefmt is None else super().formatTime(record, datefmt)

    def line(self, created: float, level: str, name: str, message: str, call_id: str | None = None,
             trace_id: str | None = None, fields: dict[str, Any] | None = None) -> str:
        """The line ``format`` makes of a record with these parts and no traceback, without making the record
        (the call log's, once per call). ``message`` is already redacted; the text format shows no fields."""
        if call_id:
            return f"{local_time(created)} {level} {name} [call {call_id}]: {escaped(message)}"
        return f"{local_time(created)} {level} {name}: {escaped(message)}"


def escaped(message: str) -> str:
    """A message holds what callers send (a user name, a tool's text): a line break or terminal escape in it would
    forge a line or reach the reader's terminal, so control characters are written escaped. A traceback, appended
    after the message, keeps its lines."""
    if _CONTROL.search(message):
        return _CONTROL.sub(lambda found: found.group().encode("unicode_escape").decode(), message)
    return message


_CONTROL = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]")  # C0 but tab, DEL, C1, line separators


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (ISO-8601, UTC), level, logger, message, call_id and trace_id when known,
    exception (the traceback's text) when there is one, and the record's ``fields`` (a flat mapping of names to
    scalars a producer passes in ``extra``; the standard keys win a clash)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = _entry(record.created, record.levelname, record.name, record.getMessage(),
                       getattr(record, "call_id", None), getattr(record, "trace_id", None),
                       getattr(record, "fields", None))
        # gateway.secrets leaves the redacted traceback in exc_text once a secret is known; else format it.
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["exception"] = record.exc_text
        if record.stack_info:
            entry["stack"] = record.stack_info
        return encoded(entry)

    def line(self, created: float, level: str, name: str, message: str, call_id: str | None = None,
             trace_id: str | None = None, fields: dict[str, Any] | None = None) -> str:
        """The line ``format`` makes of a record with these parts and no traceback, without making the record
        (the call log's, once per call). ``message`` is already redacted; ``fields`` are redacted here."""
        return encoded(_entry(created, level, name, message, call_id, trace_id, fields))


def encoded(entry: dict[str, Any]) -> str:
    """``entry`` as one compact line of ASCII JSON. orjson writes it (~6x faster than json) when its text is ASCII,
    as it nearly always is; json writes the rest (non-ASCII text as ``\\u`` escapes, a lone surrogate, an integer
    past 64 bits). Where orjson's line differs from json's: floats in their shortest spelling (``1e16``,
    ``0.00001``), NaN and infinities as ``null`` (arguments never hold them: they are refused as non-finite), an
    ``Enum`` as its value."""
    try:
        data = orjson.dumps(entry, default=str, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError is one
        return _ENCODER.encode(entry)
    return data.decode() if data.isascii() else _ENCODER.encode(entry)


def _entry(created: float, level: str, name: str, message: str, call_id: str | None, trace_id: str | None,
           fields: dict[str, Any] | None) -> dict[str, Any]:
    entry: dict[str, Any] = {"time": iso_time(created), "level": level, "logger": name, "message": message}
    if call_id:
        entry["call_id"] = call_id
    if trace_id:
        entry["trace_id"] = trace_id
    if fields:
        known = secrets.known_values()
        for field, value in fields.items():
            if field not in entry:  # the standard keys win a clash
                entry[field] = secrets.redact(value, known) if known and isinstance(value, str) else value
    return entry


def iso_time(timestamp: float) -> str:
    """``2026-11-30T13:18:16.123Z``: what log and audit lines say of when. The text of the second is made once a
    second, not once a line."""
    global _second
    whole = int(timestamp)  # after 1970: the integer part, as math.modf takes it
    micro = round((timestamp - whole) * 1_000_000)  # as datetime rounds a timestamp to the microsecond
    if micro == 1_000_000:
        whole, micro = whole + 1, 0
    second, text = _second
    if whole != second:
        text = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _second = (whole, text)
    return text + _MILLISECONDS[micro // 1000]


_MILLISECONDS = tuple(f".{ms:03d}Z" for ms in range(1000))  # a table: formatting them took half of iso_time

_second = (-1, "")  # (a second since the epoch, its text): replaced whole, so threads never see half of it


def local_time(timestamp: float) -> str:
    """``2026-11-30 14:18:16,123`` (local time): what text lines say of when, as ``logging.Formatter`` writes it.
    The text of the second is made once a second, not once a line."""
    global _local_second
    whole = int(timestamp)
    second, text = _local_second
    if whole != second:
        text = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(whole))
        _local_second = (whole, text)
    return f"{text},{int((timestamp - whole) * 1000):03d}"  # the milliseconds as LogRecord.msecs has them


_local_second = (-1, "")

