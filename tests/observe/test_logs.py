"""Structured logs (gateway.observe.logs, gateway.observe.calllog): log_format json gives one JSON object per line from
every logger, uvicorn's included; each call logs one line carrying its call id, the id an internal error's result
names; secrets never appear (issue 13)."""

from __future__ import annotations

import json
import logging
import sys

import httpx
import pytest
from support import serve_process

from gateway.events import CallActivity, current_call
from gateway.observe.calllog import CallLog
from gateway.observe.logs import CallIds, JsonFormatter, TextFormatter

TOOLS = """
tools:
  - id: add
    name: Add
    user_description: Adds.
    ai_description: Adds two numbers.
    binding: {python: "logged:add"}
  - id: broken
    name: Broken
    user_description: Fails.
    ai_description: Always fails with an internal error.
    binding: {python: "logged:broken"}
  - id: keyed
    name: Keyed
    user_description: Needs a key.
    ai_description: Sends a secret upstream (never called here; its definition names the secret).
    binding:
      http:
        url: "{{ gateway.base_url }}/demo/stations"
        headers: {X-Key: "{{ secrets.LOGS_TEST_TOKEN }}"}
"""
LOGGED = """
import logging


def add(a: float, b: float) -> float:
    logging.getLogger("tools.add").info("adding %s and %s", a, b)  # in a worker thread
    return a + b


def broken(token: str = "") -> str:
    raise RuntimeError(f"bad token {token}")
"""
SECRET = "L0gs-S3cret/Value+xyz"


def test_json_lines_name_each_call_and_the_internal_error_reference(write_definitions):
    """Every line of a json-format server's output parses; each call has one gateway.calls line with its call id,
    which lines the tool logs carry too; the 'ref' of an internal error's result is the call id of that call's lines
    (its traceback included), and the secret echoed in the traceback is redacted."""
    definitions = write_definitions({"tools.yaml": TOOLS, "python/logged.py": LOGGED})
    answers = []

    def run(url: str) -> None:
        for n in range(3):
            answers.append(httpx.post(f"{url}/tools/add/call", json={"a": n, "b": 1}, timeout=10).json())
        answers.append(httpx.post(f"{url}/tools/broken/call", json={"token": SECRET}, timeout=10).json())

    output = serve_process(definitions, env={"TOOL_GATEWAY_LOG_FORMAT": "json", "LOGS_TEST_TOKEN": SECRET},
                           while_running=run)
    lines = [json.loads(line) for line in output.splitlines() if line.strip()]
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    assert any(line["logger"].startswith("uvicorn") for line in lines)  # "Uvicorn running on …", as JSON too
    calls = [line for line in lines if line["logger"] == "gateway.calls"]
    assert [(c["tool"], c["outcome"]) for c in calls] == [("add", "ok")] * 3 + [("broken", "failed")]
    assert len({c["call_id"] for c in calls}) == 4
    # A line a tool logs (in the worker thread that runs it) carries its call's id too.
    assert [line["call_id"] for line in lines if line["logger"] == "tools.add"] == [c["call_id"] for c in calls[:3]]
    failure = answers[-1]
    assert failure["is_error"]
    reference = failure["text"].rpartition("ref ")[2].rstrip(".")
    assert reference == calls[-1]["call_id"]
    traceback_line = next(line for line in lines if line["logger"] == "gateway.invoke")
    assert traceback_line["call_id"] == reference and "RuntimeError" in traceback_line["exception"]
    assert SECRET not in output and "[secret LOGS_TEST_TOKEN]" in traceback_line["exception"]


def test_text_lines_name_the_call_they_were_logged_in(caplog):
    """In text format a line logged inside a call says [call <id>]; outside a call it is as before."""
    handler = logging.StreamHandler()
    handler.addFilter(CallIds())
    handler.setFormatter(TextFormatter())
    record = logging.LogRecord("gateway.test", logging.INFO, __file__, 1, "hello %s", ("there",), None)
    assert handler.filter(record)
    assert handler.format(record).endswith(" INFO gateway.test: hello there")
    token = current_call.set(CallActivity("call", id="c0ffee"))
    try:
        inside = logging.LogRecord("gateway.test", logging.INFO, __file__, 1, "hello", (), None)
        handler.filter(inside)
    finally:
        current_call.reset(token)
    assert handler.format(inside).endswith(" INFO gateway.test [call c0ffee]: hello")


@pytest.mark.parametrize("level", [logging.INFO, logging.WARNING])
def test_the_call_log_writes_one_line_per_call_unless_its_level_is_off(caplog, level):
    """The call log writes one INFO line per ended call, with the call's fields; with gateway.calls above INFO it
    writes nothing."""
    call = CallActivity("call", id="abc123", tool="add", surface="rest", caller="key", user="ann")
    call.outcome, call.duration_s, call.result_chars = "ok", 0.0123, 3
    with caplog.at_level(level, logger="gateway.calls"):
        CallLog().end(call)
    if level > logging.INFO:
        assert caplog.records == []
        return
    (record,) = caplog.records
    assert record.call_id == "abc123" and record.getMessage() == "add via rest by key (user ann): ok in 12.3 ms, 3 chars"
    entry = json.loads(JsonFormatter().format(record))
    assert entry["call_id"] == "abc123" and (entry["tool"], entry["outcome"], entry["duration_ms"]) == ("add", "ok", 12.3)


def test_iso_time_is_datetimes_text_to_the_millisecond():
    """The once-a-second cached timestamp text is what datetime writes, at second boundaries and rounding edges."""
    from datetime import UTC, datetime

    from gateway.observe.logs import iso_time

    for moment in (0.0, 1.9995, 1764508696.123, 1764508696.9999996, 1918750199.8339994, 1918750200.0004):
        expected = datetime.fromtimestamp(moment, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        assert iso_time(moment) == expected


def test_json_lines_inside_a_traced_call_carry_both_ids():
    """A JSON line logged inside a call carries the call id and, when tracing gave the call one, the trace id;
    a traceback comes as "exception"."""
    handler = logging.StreamHandler()
    handler.addFilter(CallIds())
    handler.setFormatter(JsonFormatter())
    token = current_call.set(CallActivity("call", id="c0ffee", trace_id="0af7651916cd43dd8448eb211c80319c"))
    try:
        try:
            raise ValueError("no")
        except ValueError:
            record = logging.getLogger("gateway.test").makeRecord("gateway.test", logging.ERROR, __file__, 1,
                                                                  "failed", (), sys.exc_info())
        handler.filter(record)
    finally:
        current_call.reset(token)
    entry = json.loads(handler.format(record))
    assert (entry["call_id"], entry["trace_id"]) == ("c0ffee", "0af7651916cd43dd8448eb211c80319c")
    assert entry["level"] == "ERROR" and "ValueError: no" in entry["exception"]
