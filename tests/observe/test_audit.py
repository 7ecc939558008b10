"""The audit trail (gateway.observe.audit): after a mixed run of a real server, every line of every file is one JSON
object with the documented fields, rotation split no line and lost none, and a secret never appears in any
spelling (issue 13)."""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import re
import threading
from urllib.parse import quote, quote_plus

import httpx
import pytest
from support import CONSOLE, json_lines, serve_process

from gateway.events import CallActivity
from gateway.observe import audit
from gateway.runtime.gateway import Gateway
from gateway.settings import Settings, SettingsInvalid

SECRET = 'Aud1t/S3cr+t&V4l=ue xyz"q'
NAME = "AUDIT_TEST_TOKEN"
TOOLS = """
tools:
  - id: add
    name: Add
    user_description: Adds.
    ai_description: Adds two numbers.
    binding: {python: "audited:add"}
  - id: check_token
    name: Check a token
    user_description: Refuses every token.
    ai_description: Refuses the token it is given, quoting it.
    binding: {python: "audited:check_token"}
  - id: private
    name: Private
    user_description: Keeps its arguments out of the audit trail.
    ai_description: Echoes a note.
    binding: {python: "audited:echo"}
    audit: {arguments: false}
  - id: keyed
    name: Keyed
    user_description: Needs a key.
    ai_description: Sends a secret upstream (never called here; its definition names the secret).
    binding:
      http:
        url: "{{ gateway.base_url }}/demo/stations"
        headers: {X-Key: "{{ secrets.AUDIT_TEST_TOKEN }}"}
"""
AUDITED = """
from gateway import ToolError


def add(a: float, b: float) -> float:
    return a + b


def check_token(token: str) -> str:
    raise ToolError(f"token {token!r} refused: {token}")


def echo(note: str) -> str:
    return note
"""
CALL_FIELDS = {"time", "event", "call_id", "caller", "user", "surface", "tool", "version", "arguments_sha256",
               "argument_bytes", "outcome", "duration_ms", "result_chars", "truncated"}
RELOAD_FIELDS = {"time", "event", "ok", "changed", "version", "tools", "duration_ms", "timed_out", "added", "removed",
                 "modified", "problems"}
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def _leaks(text: str) -> list[str]:
    """Pieces of the secret found in ``text``, in any text spelling or in base64 at any offset (as
    tests/bindings/test_http_secrets_encodings.py checks)."""
    raw = SECRET.encode()
    pieces = ["S3cr", "V4l", "xyz", quote(SECRET, safe=""), quote_plus(SECRET)]
    for skip in range(3):
        body = raw[skip:][:len(raw[skip:]) // 3 * 3]
        pieces.append(base64.b64encode(body).decode()[4:16])
    return [piece for piece in pieces if piece in text]


def _canonical_digest(arguments: object) -> str:
    return hashlib.sha256(json.dumps(arguments, sort_keys=True, separators=(",", ":"),
                                     ensure_ascii=False).encode()).hexdigest()


def test_audit_file_after_a_mixed_run(write_definitions, tmp_path):
    """Successes, argument errors, a tool error echoing a secret, a tool that keeps its arguments out, an edit and a
    reload: one valid line per call and reload, in order across rotated files, with no spelling of the secret."""
    definitions = write_definitions({"tools.yaml": TOOLS, "python/audited.py": AUDITED})
    trail = tmp_path / "audit" / "audit.jsonl"
    trail.parent.mkdir()
    sent: list[tuple[str, object]] = []

    def run(url: str) -> None:
        def call(tool: str, arguments: object) -> dict:
            sent.append((tool, arguments))
            return httpx.post(f"{url}/tools/{tool}/call", json=arguments, timeout=10).json()

        for n in range(12):
            assert not call("add", {"a": n, "b": 0.5})["is_error"]
        assert call("add", {"a": "one", "b": 2})["is_error"]  # argument errors
        assert call("add", {"a": 1})["is_error"]
        assert call("check_token", {"token": SECRET})["is_error"]  # the secret as an argument, echoed in the error
        assert call("private", {"note": "between us"})["text"] == "between us"
        assert not httpx.post(f"{url}/admin/reload", timeout=30, auth=CONSOLE).json()["changed"]  # a reload, nothing new
        opened = httpx.get(f"{url}/admin/api/files/tools.yaml", timeout=10).json()  # an edit in the console
        edited = opened["text"].replace("Adds two numbers.", "Adds two numbers exactly.")
        saved = httpx.put(f"{url}/admin/api/files/tools.yaml", json={"text": edited, "base_sha256": opened["sha256"]}, auth=CONSOLE,
                          timeout=30)
        assert saved.status_code == 200, saved.text
        assert not call("add", {"a": 2, "b": 2})["is_error"]

    serve_process(definitions, env={"TOOL_GATEWAY_AUDIT_LOG": str(trail), "TOOL_GATEWAY_AUDIT_MAX_BYTES": "1500",
                                    "TOOL_GATEWAY_AUDIT_BACKUPS": "50", NAME: SECRET}, while_running=run)

    files = sorted(trail.parent.iterdir(), key=lambda p: -int(p.suffix[1:]) if p.suffix[1:].isdigit() else 0)
    assert len(files) > 2 and files[-1] == trail  # rotated: the oldest backup first, the live file last
    entries = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert _leaks(text) == [], (path, _leaks(text))
        assert text.endswith("\n") and path.stat().st_size <= 1500  # whole lines only, the file within its limit
        entries += json_lines(text)

    calls = [e for e in entries if e["event"] == "call"]
    reloads = [e for e in entries if e["event"] == "reload"]
    admins = [e for e in entries if e["event"] == "admin"]
    assert [e["event"] for e in entries] == ["call"] * 16 + ["admin", "reload", "admin", "reload", "call"]  # all, in order
    assert [(c["tool"], c.get("arguments", "(kept out)")) for c in calls if c["tool"] != "check_token"] == \
        [(tool, arguments if tool != "private" else "(kept out)") for tool, arguments in sent if tool != "check_token"]
    for entry, (tool, arguments) in zip(calls, sent, strict=True):
        assert CALL_FIELDS <= entry.keys() and TIME.match(entry["time"])
        assert len(entry["call_id"]) == 16 and entry["surface"] == "rest" and entry["caller"] is None
        assert entry["arguments_sha256"] == _canonical_digest(arguments)
        assert entry["argument_bytes"] == len(json.dumps(arguments, sort_keys=True, separators=(",", ":")).encode())
        assert isinstance(entry["duration_ms"], float) and entry["truncated"] is False
    assert [c["outcome"] for c in calls] == ["ok"] * 12 + ["invalid_arguments"] * 2 + ["error", "ok", "ok"]
    assert "error" not in calls[0] and "Invalid arguments for tool 'add'" in calls[12]["error"]
    refused = calls[14]
    assert refused["arguments"] == {"token": f"[secret {NAME}]"} and f"[secret {NAME}]" in refused["error"]
    assert calls[15]["result_chars"] == len("between us") and "arguments" not in calls[15]
    assert [(a["action"], a["caller"]) for a in admins] == [("reload", None), ("edit", None)]
    assert admins[1]["detail"]["path"] == "tools.yaml" and TIME.match(admins[1]["time"])
    unchanged, reload = reloads
    assert all(RELOAD_FIELDS <= r.keys() and r["ok"] and r["problems"] == 0 and TIME.match(r["time"]) for r in reloads)
    assert not unchanged["changed"] and unchanged["modified"] == []
    # (the runtime counts every tool of an edited file as modified)
    assert reload["changed"] and "add" in reload["modified"] and reload["added"] == reload["removed"] == []
    assert calls[-1]["version"] == reload["version"] != calls[0]["version"]


def _call(n: int) -> CallActivity:
    call = CallActivity("call", id=f"{n:016x}", tool="add", surface="test", arguments={"a": n})
    call.outcome = "ok"
    return call


def test_admin_events_are_audited_and_redacted(write_definitions, tmp_path, monkeypatch):
    """An admin event becomes an "admin" line (action, caller, detail) with a known secret redacted from its
    detail; close() writes everything queued before it returns."""
    monkeypatch.setenv(NAME, SECRET)
    definitions = write_definitions({"tools.yaml": TOOLS, "python/audited.py": AUDITED})  # names the secret
    trail = tmp_path / "audit.jsonl"
    gateway = Gateway(Settings(definitions=definitions, reload=False, audit_log=str(trail)))
    trail_observer = audit.make(gateway)
    gateway.events.subscribe(trail_observer)
    gateway.events.emit("admin", action="edit", caller="admin", detail={"file": "tools.yaml", "text": SECRET})
    for n in range(200):
        trail_observer.end(_call(n))
    trail_observer.close()
    lines = json_lines(trail.read_text())
    assert lines[0]["event"] == "admin" and TIME.match(lines[0]["time"])
    assert (lines[0]["action"], lines[0]["caller"]) == ("edit", "admin")
    assert lines[0]["detail"] == {"file": "tools.yaml", "text": f"[secret {NAME}]"}
    assert [line["arguments"]["a"] for line in lines[1:]] == list(range(200))


def test_a_full_queue_drops_lines_and_says_so(tmp_path, caplog, monkeypatch):
    """A writer that falls behind never blocks a call: lines past the queue's capacity are dropped, one warning is
    logged for the burst, and a "dropped" line tells how many were lost."""
    monkeypatch.setattr(audit, "QUEUE_LINES", 5)
    trail = audit.AuditTrail(audit.Sink(str(tmp_path / "audit.jsonl"), 0, 0))
    release = threading.Event()
    original = trail.sink.write

    def stalled(lines):  # the writer is stuck on its first batch until released
        release.wait(10)
        original(lines)

    trail.sink.write = stalled
    with caplog.at_level(logging.WARNING, logger="gateway.audit"):
        for n in range(20):
            trail.end(_call(n))
        warnings = [r for r in caplog.records if "fell behind" in r.getMessage()]
        release.set()
        trail.close()
    lines = json_lines((tmp_path / "audit.jsonl").read_text())
    calls = [line for line in lines if line["event"] == "call"]
    dropped = sum(line["lines"] for line in lines if line["event"] == "dropped")
    assert len(warnings) == 1 and dropped > 0 and len(calls) + dropped == 20


def test_a_dash_writes_to_standard_output(capsys):
    """audit_log "-" sends the lines to standard output, one JSON object per line."""
    trail = audit.AuditTrail(audit.Sink("-", 100, 5))
    for n in range(3):
        trail.end(_call(n))
    trail.close()
    lines = capsys.readouterr().out.splitlines()
    assert [json.loads(line)["call_id"] for line in lines] == [f"{n:016x}" for n in range(3)]


def test_without_backups_the_file_is_never_rotated(tmp_path):
    """audit_backups 0 keeps one file past audit_max_bytes rather than throw lines away."""
    trail = audit.AuditTrail(audit.Sink(str(tmp_path / "audit.jsonl"), 200, 0))
    for n in range(20):
        trail.end(_call(n))
    trail.close()
    assert [p.name for p in tmp_path.iterdir()] == ["audit.jsonl"]
    assert len((tmp_path / "audit.jsonl").read_text().splitlines()) == 20


def test_an_unwritable_audit_file_is_a_settings_error(tmp_path):
    """A path that cannot be opened stops the start with a message naming the setting and the path."""
    with pytest.raises(SettingsInvalid, match="setting 'audit_log': cannot open .*missing"):
        audit.Sink(str(tmp_path / "missing" / "audit.jsonl"), 100, 1)


def test_a_private_tools_argument_error_keeps_its_text_out():
    """A tool that keeps its arguments out of the trail has no error text on an argument error (it quotes the
    arguments); its tool errors keep theirs."""
    call = _call(1)
    call.audit_arguments, call.outcome, call.error = False, "invalid_arguments", 'at $.pin: got "1234"'
    assert "error" not in audit.line(call) and "arguments" not in audit.line(call)
    call.outcome, call.error = "error", "the vault is closed"
    assert audit.line(call)["error"] == "the vault is closed"


def test_close_does_not_wait_forever_for_a_stuck_writer(tmp_path, caplog, monkeypatch):
    """A writer stuck on its output (a pipe nobody reads) holds close() for CLOSE_TIMEOUT_S at most, and the lines
    left unwritten are reported."""
    monkeypatch.setattr(audit, "CLOSE_TIMEOUT_S", 0.2)
    trail = audit.AuditTrail(audit.Sink(str(tmp_path / "audit.jsonl"), 0, 0))
    release = threading.Event()
    trail.sink.write = lambda lines: release.wait(30)
    trail.end(_call(1))
    closing = threading.Thread(target=trail.close)
    with caplog.at_level(logging.WARNING, logger="gateway.audit"):
        closing.start()
        closing.join(10)
    release.set()
    assert not closing.is_alive()
    assert any("did not finish" in record.getMessage() for record in caplog.records)
