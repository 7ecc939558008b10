"""The call log writes its line straight through the handler configure_logging installs (no LogRecord made): the
line is the one that handler would have formatted from a record, at the logger's level, secrets redacted; any
other set-up (another handler, a filter) gets a record as logging makes it (issue 13's throughput target)."""

from __future__ import annotations

import io
import json
import logging
import os

import pytest

from gateway import secrets
from gateway.events import CallActivity
from gateway.observe.calllog import MESSAGE, CallLog, _plain_handler
from gateway.observe.logs import configure_logging
from gateway.settings import Settings

SECRET_NAME = "CALLLOG_LINE_TEST_TOKEN"
SECRET = "C4llL0g-line-secret-value"


def ended_call(user: str = "ann", trace_id: str | None = None) -> CallActivity:
    call = CallActivity("call", id="0123456789abcdef", tool="sum", surface="rest", caller="key", user=user,
                        arguments={"a": 1, "b": 2}, version="0babc2aa49bd7f10")
    call.outcome, call.duration_s, call.result_chars, call.trace_id = "ok", 0.0012, 3, trace_id
    return call


@pytest.fixture
def logged():
    """Logging as serve configures it, writing to a StringIO; the root logger's set-up restored after."""
    root = logging.getLogger()
    saved = root.handlers[:], root.level

    def configure(log_format: str, level: str = "info") -> io.StringIO:
        configure_logging(Settings(log_format=log_format, log_level=level))
        stream = io.StringIO()
        root.handlers[0].setStream(stream)
        return stream

    yield configure
    root.handlers[:], root.level = saved
    os.environ.pop(SECRET_NAME, None)


def record_line(call: CallActivity) -> str:
    """The line the installed handler formats from the record the call log made before (the reference)."""
    handler = logging.getLogger().handlers[0]
    args = (call.tool, call.surface, call.caller, call.user, call.outcome, round(call.duration_s * 1000, 1),
            call.result_chars)
    message, args = (MESSAGE + ", trace %s", (*args, call.trace_id)) if call.trace_id else (MESSAGE, args)
    record = logging.getLogger("gateway.calls").makeRecord(
        "gateway.calls", logging.INFO, __file__, 0, message, args, None,
        extra={"call_id": call.id, "trace_id": call.trace_id,
               "fields": {"tool": call.tool, "surface": call.surface, "caller": call.caller, "user": call.user,
                          "outcome": call.outcome, "duration_ms": round(call.duration_s * 1000, 1),
                          "result_chars": call.result_chars}})
    return handler.format(record)


@pytest.mark.parametrize("log_format", ["json", "text"])
@pytest.mark.parametrize("trace_id", [None, "4bf92f3577b34da6a3ce929d0e36aa4d"])
def test_the_line_is_the_one_the_handler_formats_from_a_record(logged, log_format, trace_id):
    """Written without a record, the call log's line is, time aside, the one the handler makes of the record."""
    stream = logged(log_format)
    call = ended_call("ann\nforged", trace_id)
    CallLog().end(call)
    written, = stream.getvalue().splitlines()
    expected = record_line(call)
    if log_format == "json":
        written_entry, expected_entry = json.loads(written), json.loads(expected)
        assert written_entry.pop("time")[:16] == expected_entry.pop("time")[:16]
        assert written_entry == expected_entry and written.index('"message"') == expected.index('"message"')
    else:
        assert written.split(" ", 2)[2] == expected.split(" ", 2)[2] and written[:16] == expected[:16]


@pytest.mark.parametrize("log_format", ["json", "text"])
def test_a_known_secret_never_appears_and_the_level_is_honoured(logged, log_format):
    """A secret in what the line shows is redacted in the message and the fields; below INFO nothing is written."""
    stream = logged(log_format)
    os.environ[SECRET_NAME] = SECRET
    secrets.remember({SECRET_NAME})
    CallLog().end(ended_call(f"user-{SECRET}"))
    assert SECRET not in stream.getvalue() and f"[secret {SECRET_NAME}]" in stream.getvalue()
    stream = logged(log_format, "warning")
    CallLog().end(ended_call())
    assert stream.getvalue() == ""


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def test_another_handler_gets_the_record(logged, log_handler):
    """With a second handler on the way, both get the call's line, each from a record with its fields."""
    stream = logged("json")
    kept = log_handler(Kept(), "gateway.calls")
    CallLog().end(ended_call())
    record, = kept.records
    assert record.call_id == "0123456789abcdef" and record.fields["user"] == "ann"
    assert json.loads(stream.getvalue())["call_id"] == "0123456789abcdef"


@pytest.mark.parametrize("level", ["info", "debug"])
def test_http_clients_request_lines_are_debug_lines_and_the_call_log_stays_fast(logged, level):
    """httpx's and the MCP SDK's httpx2's "HTTP Request" INFO lines (one per upstream ping, every 10 s a session)
    are written only at log_level debug; their warnings always are; the call log still writes without a record."""
    stream = logged("text", level)
    for name in ("httpx", "httpx2"):
        logging.getLogger(name).info("HTTP Request: POST http://127.0.0.1:1/mcp 200 OK")
        logging.getLogger(name).warning("a warning of %s", name)
    written = stream.getvalue()
    assert ("HTTP Request" in written) is (level == "debug")
    assert "httpx: a warning of httpx\n" in written and "httpx2: a warning of httpx2\n" in written
    assert _plain_handler() is logging.getLogger().handlers[0]
