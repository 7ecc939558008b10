"""The audit trail: an append-only JSON Lines record of every tool call and every reload and admin action.

``audit_log`` names where it goes: a file (rotated like ``logging.handlers.RotatingFileHandler``: past
``audit_max_bytes`` the file becomes ``<file>.1``, ``.1`` becomes ``.2`` …, ``audit_backups`` old files kept; with
``audit_backups: 0`` the file is never rotated), or ``-`` for standard output. A line is never split across two
files. Every line is one JSON object with ``time`` (ISO-8601, UTC, milliseconds) and ``event``:

``call`` (when a tool call ends; ``time`` is when it began):
  call_id, trace_id (with tracing on), caller (the API key's name, or oauth:<user>; null with auth off), user,
  client_id and issuer (an OAuth caller's), surface, tool,
  version (the catalog version it ran on), arguments_sha256 (SHA-256 of the arguments as canonical JSON: keys
  sorted, no spaces, UTF-8, before redaction), argument_bytes (that JSON's size), arguments (redacted; absent
  when the tool says ``audit: {arguments: false}``), outcome (``gateway.events.CALL_OUTCOMES``), duration_ms,
  result_chars, truncated, error (the error text, for outcomes other than ok; not for an argument error of a tool
  that keeps its arguments out, since that text quotes them).
``reload``: ok, changed, version (served after it), tools, duration_ms, timed_out, added, removed, modified
  (tool ids), problems (how many).
``admin``: action, caller, detail.
``dropped``: lines — how many lines were lost because the writer fell behind (the queue was full).

Every secret named so far is redacted from every string of a line, in every spelling (``gateway.secrets``).
Calls never wait for the file: ``end`` puts what it needs on a bounded queue, and one writer thread turns it into
lines (digest, redaction, JSON) and writes them. When the queue is full the line is dropped and counted; a
warning is logged once per burst of drops and the count is written as a ``dropped`` line.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import queue
import sys
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .. import secrets
from ..events import Activity, CallActivity, Event, Observer
from ..settings import SettingsInvalid
from .logs import encoded, iso_time

if TYPE_CHECKING:
    from ..runtime.gateway import Gateway

log = logging.getLogger("gateway.audit")
QUEUE_LINES = 10_000  # what may wait for the writer; past that, lines are dropped rather than calls slowed
BATCH_LINES = 256  # lines the writer takes at once: one write and one flush for all of them
GATHER_S = 0.02  # how long a line may wait for others to join its batch
CLOSE_TIMEOUT_S = 10.0
_STOP = object()
# A line is compact ASCII JSON (``gateway.observe.logs.encoded``): its length is its size in bytes (rotation counts it), and
# no byte can break a reader. The digest's JSON is UTF-8, as a client would send it, made by json (its spelling of
# every number is the one the digest has always had); the encoder is made once (json.dumps with options makes one
# per call).
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


class AuditTrail(Observer):
    def __init__(self, sink: Sink):
        self.sink = sink
        # SimpleQueue: a put is one C call that never blocks; the bound is kept by _put.
        self.queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.dropped = 0  # lines lost to a full queue and not yet reported by the writer
        self._dropping = False  # in a burst of drops: warned once already
        self._lock = threading.Lock()
        self._writer = threading.Thread(target=self._write, name="gateway-audit", daemon=True)
        self._writer.start()

    def end(self, activity: Activity) -> None:
        if isinstance(activity, CallActivity):
            self._put(activity)  # read by the writer: nothing changes a call once it has ended

    def event(self, event: Event) -> None:
        if event.kind in ("reload", "admin", "approval"):
            self._put(event)

    def _put(self, item: Any) -> None:
        if self.queue.qsize() < QUEUE_LINES:
            self.queue.put(item)
            return
        with self._lock:
            self.dropped += 1
            warn, self._dropping = not self._dropping, True
        if warn:
            log.warning("audit trail: the writer fell behind (%d lines queued); dropping lines until it catches up "
                        "— their count is written as a 'dropped' line", QUEUE_LINES)

    def _write(self) -> None:
        stopping = False
        while not stopping:
            items = [self.queue.get()]
            if self.queue.qsize() < BATCH_LINES:
                # Let lines gather: a busy gateway then wakes this thread (and takes the GIL from calls) once per
                # batch, not once per call.
                time.sleep(GATHER_S)
            while len(items) < BATCH_LINES and not self.queue.empty():
                items.append(self.queue.get())
            stopping = any(item is _STOP for item in items)
            known = secrets.known_values()  # once a batch: the values are read from the environment
            lines = [text for text in (_text(item, known) for item in items if item is not _STOP) if text]
            with self._lock:
                dropped = self.dropped if self.queue.empty() else 0  # a burst ends when the writer has caught up
                if dropped:
                    self.dropped, self._dropping = 0, False
            if dropped:
                log.warning("audit trail: %d line(s) dropped", dropped)
                lines.append(_dumps({"time": iso_time(time.time()), "event": "dropped", "lines": dropped}, known))
            try:
                self.sink.write(lines)
            except Exception:  # a full disk: say so, and keep the writer (the next batch may fit)
                log.exception("audit trail: could not write %d line(s) to %s", len(lines), self.sink.name)

    def close(self) -> None:
        """Write what is queued, then stop the writer and close the file; a writer stuck on its output (a pipe
        nobody reads) does not hold the gateway's stop longer than ``CLOSE_TIMEOUT_S``."""
        self.queue.put(_STOP)
        self._writer.join(CLOSE_TIMEOUT_S)
        if self._writer.is_alive():
            log.warning("audit trail: the writer did not finish within %g s; about %d line(s) left unwritten",
                        CLOSE_TIMEOUT_S, self.queue.qsize())
            return
        self.sink.close()


def _text(item: CallActivity | Event, known: Mapping[str, str]) -> str | None:
    """The line of a call or event, redacted and serialised; None (and the bug logged) if that fails."""
    try:
        return _dumps(line(item), known)
    except Exception:  # a bug in one line must not end the writer, and so the trail
        log.exception("audit trail: could not make a %s line", item.kind)
        return None


def _dumps(entry: dict[str, Any], known: Mapping[str, str]) -> str:
    return encoded(secrets.redact_value(entry, known) if known else entry)


class Sink:
    """Where lines go, a batch at a time: standard output for ``-``, else a file rotated by size when backups are
    kept. The file is the sink's own, not a ``logging`` handler: ``logging.config.dictConfig`` (uvicorn's, an
    embedding application's) closes every handler the logging module knows, and the trail must outlive that.
    Sizes are counted in bytes here, not asked of the file per line."""

    def __init__(self, target: str, max_bytes: int, backups: int):
        self.name = "standard output" if target == "-" else target
        self.target = target
        self.backups = backups
        self.max_bytes = max_bytes if backups > 0 and target != "-" else 0
        self.file: Any = None
        self.size = 0
        if target == "-":
            return
        try:
            self.file = open(target, "ab")  # noqa: SIM115 — held open for the trail's life, closed by close()
        except OSError as exc:
            raise SettingsInvalid(f"setting 'audit_log': cannot open {target!r}: {exc.strerror}") from None
        self.size = self.file.tell()  # appended to: what an earlier run wrote counts

    def write(self, lines: list[str]) -> None:
        chunk: list[bytes] = []
        for text in lines:
            data = text.encode() + b"\n"
            # A file is rotated before the line that would take it to max_bytes (as RotatingFileHandler does); a
            # line longer than that gets a file of its own, never an empty file before it.
            if self.max_bytes and self.size and self.size + len(data) >= self.max_bytes:
                self._put(chunk)
                chunk = []
                self._rotate()
            chunk.append(data)
            self.size += len(data)
        self._put(chunk)

    def _put(self, chunk: list[bytes]) -> None:
        if not chunk:
            return
        if self.file is None:
            sys.stdout.buffer.write(b"".join(chunk))
            sys.stdout.flush()
        else:
            self.file.write(b"".join(chunk))
            self.file.flush()

    def _rotate(self) -> None:
        """``<file>`` becomes ``<file>.1``, ``.1`` becomes ``.2`` … up to ``audit_backups``; a fresh file follows."""
        self.file.close()
        for index in range(self.backups - 1, 0, -1):
            older = f"{self.target}.{index}"
            if os.path.exists(older):
                os.replace(older, f"{self.target}.{index + 1}")
        os.replace(self.target, f"{self.target}.1")
        self.file = open(self.target, "ab")  # noqa: SIM115 — as in __init__
        self.size = 0

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None


def line(item: CallActivity | Event) -> dict[str, Any]:
    """The audit line of a call or an event, before redaction."""
    if isinstance(item, CallActivity):
        return call_line(item)
    data = item.data
    entry: dict[str, Any] = {"time": iso_time(item.at), "event": item.kind}
    if item.kind == "reload":
        problems = data.get("problems", ())
        entry |= {"ok": data.get("ok"), "changed": data.get("changed"), "version": data.get("version"),
                  "tools": data.get("tools"), "duration_ms": round(data.get("duration_s", 0.0) * 1000, 1),
                  "timed_out": data.get("timed_out", False), "added": data.get("added", []),
                  "removed": data.get("removed", []), "modified": data.get("modified", []),
                  "problems": problems if isinstance(problems, int) else len(problems)}
    else:
        entry |= {"action": data.get("action"), "caller": data.get("caller"), "detail": data.get("detail")}
    return entry


def call_line(call: CallActivity) -> dict[str, Any]:
    canonical = _CANONICAL.encode(call.arguments).encode("utf-8", "surrogatepass")
    entry: dict[str, Any] = {
        "time": iso_time(call.at), "event": "call", "call_id": call.id, "caller": call.caller, "user": call.user,
        "surface": call.surface, "tool": call.tool, "version": call.version,
        "arguments_sha256": hashlib.sha256(canonical).hexdigest(), "argument_bytes": len(canonical),
    }
    if call.audit_arguments:
        entry["arguments"] = call.arguments
    entry |= {"outcome": call.outcome, "duration_ms": round(call.duration_s * 1000, 1),
              "result_chars": call.result_chars, "truncated": call.truncated}
    # An argument error quotes the arguments: not for a tool that keeps them out.
    if call.outcome != "ok" and call.error is not None and (call.audit_arguments or call.outcome != "invalid_arguments"):
        entry["error"] = call.error
    if call.trace_id:
        entry["trace_id"] = call.trace_id
    if call.issuer:  # a person with an OAuth token: which client called for them, and who vouched
        entry |= {"client_id": call.client_id, "issuer": call.issuer}
    return entry


def make(gateway: Gateway) -> AuditTrail | None:
    settings = gateway.settings
    if not settings.audit_log:
        return None
    return AuditTrail(Sink(settings.audit_log, settings.audit_max_bytes, settings.audit_backups))
