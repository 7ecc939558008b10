"""Recent calls for the admin console's live view: the last ``KEPT`` calls, and a feed of each as it ends.

Each call that ends (a ``call`` activity) becomes a ``CallRecord``: a summary (who, which tool, how it went, how
long it took) and, kept apart, the arguments and the result text, each cut to ``TEXT_CAP`` characters. The
arguments are encoded lazily and only up to the cap, so a megabyte of arguments costs no more than the cap;
a tool whose ``audit: {arguments: false}`` keeps them out of the audit trail keeps them out of here too.
Secrets are redacted (``gateway.secrets``) when a record's detail is read, not when the call ends: the call
path pays nothing for a view nobody may be looking at.

Subscribers (the console's event stream) each get a bounded ``asyncio.Queue`` on their own event loop. A call
ending on that loop's thread is put there directly; from another thread it is handed over with
``call_soon_threadsafe``. A subscriber whose queue is full misses the summary (``dropped`` counts it): a slow
reader never blocks or slows a call. ``stop()`` ends every feed at once (the server stopping).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from ..events import Activity, CallActivity, Observer
from ..secrets import MIN_REDACTED_LENGTH, forms, known_values, redact

if TYPE_CHECKING:
    from ..runtime.gateway import Gateway

KEPT = 200
TEXT_CAP = 16_384  # characters of a call's arguments, and of its result, kept for the console
QUEUE_SIZE = 256  # summaries a subscriber may fall behind by before it misses some
STOP: dict[str, Any] = {}  # put on a subscriber's queue when its feed ends (compared by identity)
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=repr)


class CallRecord:
    """One ended call as the console shows it. What the call path does not need is made when it is first read: the
    summary dict (most calls are never listed) and the arguments' JSON text (most are never opened). Arguments kept
    as they came are flat and short (``_flat_and_short``), so a record holds at most about ``TEXT_CAP`` of them;
    others are encoded, capped, when the call ends. Two threads reading at once make the same value: no lock."""

    __slots__ = ("_arguments", "_encoded", "_facts", "_summary", "error", "result", "result_truncated")

    def __init__(self, facts: tuple[Any, ...], arguments: Any, encoded: tuple[str | None, bool] | None,
                 result: str | None, result_truncated: bool, error: str | None):
        self._facts = facts  # what the summary shows, in record_of's order
        self._summary: dict[str, Any] | None = None
        self._arguments = arguments  # as they came, until encoded
        self._encoded = encoded  # (JSON text cut to TEXT_CAP or None when hidden, whether it was cut)
        self.result = result  # the result text (what an LLM reads), cut to TEXT_CAP; None when the call ended none
        self.result_truncated = result_truncated
        self.error = error

    @property
    def summary(self) -> dict[str, Any]:
        summary = self._summary
        if summary is None:
            (call_id, at, caller, user, surface, tool, outcome, duration_s, side, version, trace_id,
             conversation_id) = self._facts
            summary = self._summary = {
                "id": call_id, "at": at, "caller": caller, "user": user, "surface": surface, "tool": tool,
                "outcome": outcome, "duration_ms": round(duration_s * 1000, 3), "side": side, "version": version,
                "is_error": outcome != "ok", "trace_id": trace_id, "conversation_id": conversation_id,
            }
        return summary

    def _encoded_arguments(self) -> tuple[str | None, bool]:
        encoded = self._encoded
        if encoded is None:
            encoded = self._encoded = capped_json(self._arguments)
        return encoded

    @property
    def arguments(self) -> str | None:
        """JSON text, cut to TEXT_CAP; None when the tool keeps its arguments out of records."""
        return self._encoded_arguments()[0]

    @property
    def arguments_truncated(self) -> bool:
        return self._encoded_arguments()[1]

    def detail(self) -> dict[str, Any]:
        """The summary with the arguments, result and error, every secret the gateway has read redacted."""
        secrets = known_values()

        def shown(text: str | None, cut: bool = False) -> str | None:
            if not text or not secrets:
                return text
            text = redact(text, secrets)
            return without_cut_secret(text, secrets) if cut else text

        return self.summary | {
            "arguments": shown(self.arguments, self.arguments_truncated),
            "arguments_truncated": self.arguments_truncated, "arguments_hidden": self.arguments is None,
            "result": shown(self.result, self.result_truncated), "result_truncated": self.result_truncated,
            "error": shown(self.error, self.error is not None and len(self.error) >= TEXT_CAP),
        }


def without_cut_secret(text: str, secrets: dict[str, str]) -> str:
    """``text`` (cut at the cap) without the start of a secret the cut left at its end: ``redact`` finds whole
    spellings only, and the first 15 of 16 characters are no less a leak."""
    for name, value in secrets.items():
        for form in forms(value):
            for length in range(min(len(form) - 1, len(text)), MIN_REDACTED_LENGTH - 1, -1):
                if text.endswith(form[:length]):
                    return f"{text[:-length]}[secret {name}]"
    return text


_HIDDEN = (None, False)


def record_of(call: CallActivity) -> CallRecord:
    result = call.result
    facts = (call.id, call.at, call.caller, call.user, call.surface, call.tool, call.outcome, call.duration_s,
             call.side, call.version, call.trace_id, call.conversation_id)
    arguments = call.arguments
    if not call.audit_arguments:
        arguments, encoded = None, _HIDDEN
    elif _flat_and_short(arguments, TEXT_CAP):  # the call's final arguments: small, kept to encode when read
        encoded = None
    else:
        arguments, encoded = None, capped_json(arguments)
    text = getattr(result, "text", None)
    error = getattr(result, "error", None)
    return CallRecord(facts, arguments, encoded,
                      text[:TEXT_CAP] if isinstance(text, str) else None,
                      isinstance(text, str) and (len(text) > TEXT_CAP or bool(getattr(result, "truncated", False))),
                      error[:TEXT_CAP] if isinstance(error, str) else None)


def capped_json(value: Any, cap: int = TEXT_CAP) -> tuple[str, bool]:
    """``value`` as JSON text of at most ``cap`` characters, encoded no further than the cap; whether it was cut.
    Arguments that arrived as text (a JSON string an LLM wrote) are that text."""
    if isinstance(value, bytes):
        value = value[:cap * 4].decode("utf-8", "replace")
    if isinstance(value, str):
        return value[:cap], len(value) > cap
    if _flat_and_short(value, cap):  # most arguments: the C encoder, in one go, costs less than the walk
        text = _ENCODER.encode(value)
        return text[:cap], len(text) > cap  # escapes may lengthen a short string sixfold
    chunks: list[str] = []
    size = 0
    try:
        for chunk in _ENCODER.iterencode(value):
            chunks.append(chunk)
            size += len(chunk)
            if size > cap:
                break
    except (ValueError, RecursionError):  # a circular or absurdly deep value: say so rather than fail the observer
        return f"<arguments not encodable as JSON: {type(value).__name__}>", False
    return "".join(chunks)[:cap], size > cap


_SCALARS = (int, float, bool, type(None))
_FLAT_KEYS = 32


def _flat_and_short(value: Any, cap: int) -> bool:
    """Whether ``value`` is an object of a few scalar or short-string members: its JSON is about ``cap`` at most."""
    if type(value) is not dict or len(value) > _FLAT_KEYS:
        return False
    budget = cap // _FLAT_KEYS - 32  # per member, with room for its key and the punctuation
    return all(type(key) is str and len(key) <= budget
               and (type(member) in _SCALARS or (type(member) is str and len(member) <= budget))
               for key, member in value.items())


class Subscription:
    """One reader of the feed, on the event loop it subscribed from."""

    def __init__(self, loop: asyncio.AbstractEventLoop, size: int = QUEUE_SIZE):
        self.loop = loop
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(size)
        self.dropped = 0  # summaries missed since the reader last looked (it resets this)

    def offer(self, summary: dict[str, Any]) -> None:
        """Hand over a summary from any thread; never waits."""
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self.loop:
            self._put(summary)
            return
        try:
            self.loop.call_soon_threadsafe(self._put, summary)
        except RuntimeError:  # its loop is closed: the reader is gone
            pass

    def _put(self, summary: dict[str, Any]) -> None:
        try:
            self.queue.put_nowait(summary)
        except asyncio.QueueFull:
            self.dropped += 1

    def _end(self) -> None:
        while True:  # the end must arrive even when the queue is full: it displaces the oldest summary
            try:
                self.queue.put_nowait(STOP)
                return
            except asyncio.QueueFull:
                self.queue.get_nowait()
                self.dropped += 1

    def end(self) -> None:
        """End this feed (from any thread): the reader gets ``STOP`` after what it has not read yet."""
        try:
            self.loop.call_soon_threadsafe(self._end)
        except RuntimeError:
            pass

    async def next(self, timeout: float) -> dict[str, Any] | None:
        """The next summary, ``STOP`` when the feed ended, None when nothing came within ``timeout`` seconds."""
        try:
            async with asyncio.timeout(timeout):  # not wait_for: on 3.11 it may swallow the stream's cancellation
                return await self.queue.get()
        except TimeoutError:
            return None


class LiveCalls(Observer):
    def __init__(self, kept: int = KEPT):
        self._records: OrderedDict[str, CallRecord] = OrderedDict()
        self._kept = kept
        self._lock = threading.Lock()  # calls may end on several threads (several event loops)
        self._subscribers: tuple[Subscription, ...] = ()
        self._stopped = False

    def end(self, activity: Activity) -> None:
        if not isinstance(activity, CallActivity):
            return
        record = record_of(activity)
        with self._lock:
            self._records[activity.id] = record
            if len(self._records) > self._kept:
                self._records.popitem(last=False)
            subscribers = self._subscribers
        for subscription in subscribers:
            subscription.offer(record.summary)

    def recent(self) -> list[dict[str, Any]]:
        """The summaries of the calls kept, newest first."""
        with self._lock:
            return [record.summary for record in reversed(self._records.values())]

    def get(self, call_id: str) -> CallRecord | None:
        with self._lock:
            return self._records.get(call_id)

    def subscribe(self) -> Subscription:
        """A feed of every call that ends from now on, read on the running event loop."""
        subscription = Subscription(asyncio.get_running_loop())
        with self._lock:
            if self._stopped:
                subscription.end()
            else:
                self._subscribers = (*self._subscribers, subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            self._subscribers = tuple(s for s in self._subscribers if s is not subscription)

    def stop(self) -> None:
        """End every feed now and refuse new ones: a server that is stopping must not wait for its readers."""
        with self._lock:
            self._stopped = True
            subscribers, self._subscribers = self._subscribers, ()
        for subscription in subscribers:
            subscription.end()

    def close(self) -> None:
        self.stop()


def make(gateway: Gateway) -> LiveCalls:
    return LiveCalls()
