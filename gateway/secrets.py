"""Secrets: values from the gateway's environment, named in templates as ``{{ secrets.NAME }}``.

Which variables a template may name is decided when definitions (and the LLM loop's provider settings) load,
by ``refusal``: never the gateway's own (``TOOL_GATEWAY_*``: its API keys, its settings), and, when the
``allowed_secrets`` setting lists names, only those.

They are read when a call needs them (so rotating a key needs no reload), and kept out of everything the
gateway shows: a missing secret is reported by name only, and ``redact`` replaces values in text that leaves
a binding (results, error messages) in every spelling the gateway, its libraries or a service echoing them
produce (``forms``): as is, JSON-escaped, percent- or form-encoded, base64 as inside a Basic credential, and
as Python prints strings and bytes. Every log record of the process (any logger, any handler: the gateway's,
httpx's, httpcore's, uvicorn's) is redacted when it is created (``logging.setLogRecordFactory``), once a
secret has been named.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import logging
import os
import re
import threading
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, quote_plus

if TYPE_CHECKING:
    from .settings import Settings

# Shorter values would blank out ordinary words; such a value is no secret anyway.
MIN_REDACTED_LENGTH = 4
# A base64 spelling shorter than this (6 bytes of the secret) would match unrelated base64 too often.
MIN_BASE64_LENGTH = 8
GATEWAY_PREFIX = "TOOL_GATEWAY_"  # the gateway's own variables (gateway.settings.ENV_PREFIX)
_known: set[str] = set()
# Values the gateway obtained rather than read from its environment (the OAuth tokens and registered client
# secrets of upstream connections), each with the name shown in its place; the latest MAX_CONCEALED are kept.
_concealed: dict[str, str] = {}
_concealed_count = 0
MAX_CONCEALED = 1024
_known_lock = threading.Lock()
_logging_redacted = False
_UPPER_HEX = re.compile(r"%[0-9A-F]{2}")
# Values to redact, by the name shown in their place: a mapping, or (name, value) pairs when one name stands
# for several values (a secret, and the credential built from it).
Hidden = Mapping[str, str] | Iterable[tuple[str, str]]


class SecretsMissing(LookupError):
    def __init__(self, names: Collection[str]):
        self.names = tuple(sorted(names))
        listed = ", ".join(self.names)
        super().__init__(f"secret(s) {listed} not set: set the environment variable(s) {listed} where the "
                         "gateway runs")


class SecretsRefused(SecretsMissing):
    def __init__(self, names: Collection[str]):
        super().__init__(names)
        message = f"secret(s) {', '.join(self.names)} may not be read: {GATEWAY_PREFIX}* variables are the gateway's own"
        self.args = (message,)


def refusal(name: str, settings: Settings) -> str | None:
    """Why a template may not read the environment variable ``name`` under ``settings``; None if it may.

    The one rule for every ``{{ secrets.NAME }}``: definitions' templates and the LLM loop's provider keys.
    """
    if name.startswith(GATEWAY_PREFIX):
        return (f"secret '{name}' may not be read: {GATEWAY_PREFIX}* variables are the gateway's own settings "
                "and keys")
    allowed = settings.allowed_secrets
    if allowed and name not in allowed:
        return f"secret '{name}' is not in the allowed_secrets setting (allowed: {', '.join(sorted(allowed))})"
    return None


def missing(names: Collection[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The names that have no (or an empty) value in the environment."""
    environ = os.environ if environ is None else environ
    return sorted(name for name in names if not environ.get(name))


def resolve(names: Collection[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The values of ``names``; raises ``SecretsMissing`` naming every one that is not set.

    The gateway's own variables are never given out, even to a name that escaped the load-time check.
    """
    if not names:
        return {}
    refused = [name for name in names if name.startswith(GATEWAY_PREFIX)]
    if refused:
        raise SecretsRefused(refused)
    environ = os.environ if environ is None else environ
    absent = missing(names, environ)
    if absent:
        raise SecretsMissing(absent)
    remember(names)
    return {name: environ[name] for name in names}


@functools.lru_cache(maxsize=256)
def forms(value: str) -> tuple[str, ...]:
    """Every spelling of ``value`` to redact, longest first (so a spelling containing another goes first)."""
    found = {value, repr(value)[1:-1], repr(value.encode())[2:-1], html.escape(value), html.escape(value, False)}
    for ascii_only in (True, False):
        escaped = json.dumps(value, ensure_ascii=ascii_only)[1:-1]
        twice = json.dumps(escaped, ensure_ascii=ascii_only)[1:-1]  # a JSON text quoted in another (an echo)
        found |= {escaped, escaped.replace("/", "\\/"), twice}
    for safe in ("", "/", "!'()*"):  # components, paths, JavaScript's encodeURIComponent
        found |= {quote(value, safe=safe), quote_plus(value, safe=safe)}
    found |= {_UPPER_HEX.sub(lambda match: match[0].lower(), form) for form in found if "%" in form}
    found |= _base64_cores(value.encode())
    return tuple(sorted((form for form in found if len(form) >= MIN_REDACTED_LENGTH), key=len, reverse=True))


def _base64_cores(raw: bytes) -> set[str]:
    """The base64 of ``raw`` alone, and as it appears inside the base64 of a longer text (``user:secret`` in a
    Basic credential): which characters encode the secret alone depends on its offset modulo 3, so one spelling
    per offset, each without the partial groups at its ends (which mix in neighbouring bytes)."""
    cores = {base64.b64encode(raw).decode("ascii"), base64.urlsafe_b64encode(raw).decode("ascii")}
    cores |= {core.rstrip("=") for core in cores}  # the whole value alone, padded or not
    for skip in range(3):
        body = raw[skip:]
        body = body[:len(body) - len(body) % 3]
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            core = encode(body).decode("ascii")
            if len(core) >= MIN_BASE64_LENGTH:
                cores.add(core)
    return cores


def redact(text: str, secrets: Hidden) -> str:
    """``text`` with each secret's value, in each of its ``forms``, replaced by ``[secret NAME]``."""
    return _replace(text, _spellings(_pairs(secrets)))


def redact_value(value: Any, secrets: Hidden) -> Any:
    """A JSON value with ``redact`` applied to every string in it (keys included). Iterative: an answer nested
    as deep as JSON allows is redacted, not a RecursionError."""
    if not secrets:
        return value
    spellings = _spellings(_pairs(secrets))
    result: list[Any] = [None]
    stack: list[tuple[Any, Any, Any]] = [(value, result, 0)]  # (item, the copy holding it, its key there)
    while stack:
        item, holder, key = stack.pop()
        if isinstance(item, str):
            holder[key] = _replace(item, spellings)
        elif isinstance(item, list):
            holder[key] = copy = [None] * len(item)
            stack.extend((member, copy, index) for index, member in enumerate(item))
        elif isinstance(item, dict):
            holder[key] = copy = {}
            for name, member in item.items():
                name = _replace(name, spellings)
                copy[name] = None  # the key now, so the copy keeps the order of the original
                stack.append((member, copy, name))
        else:
            holder[key] = item
    return result[0]


def _pairs(secrets: Hidden) -> tuple[tuple[str, str], ...]:
    return tuple(secrets.items() if isinstance(secrets, Mapping) else secrets)


# (length of the shortest form, (form, replacement) pairs in the order they are replaced): a text shorter than
# the shortest form holds none (most strings of a JSON answer), so it is not scanned at all.
_Spellings = tuple[int, tuple[tuple[str, str], ...]]


@functools.lru_cache(maxsize=256)
def _spellings(pairs: tuple[tuple[str, str], ...]) -> _Spellings:
    """The spellings of a set of secrets, made once per set (not per string of an answer, nor per log record)."""
    spellings = tuple((form, f"[secret {name}]") for name, value in pairs
                      if len(value) >= MIN_REDACTED_LENGTH for form in forms(value))
    return min((len(form) for form, _ in spellings), default=0), spellings


def _replace(text: str, spellings: _Spellings) -> str:
    shortest, pairs = spellings
    if not pairs or len(text) < shortest:
        return text
    for form, shown in pairs:
        if form in text:
            text = text.replace(form, shown)
    return text


def remember(names: Collection[str]) -> None:
    """Redact these secrets from every log record from now on (names only are kept; values are read when a
    record is made, so a rotated value is redacted too)."""
    global _logging_redacted
    with _known_lock:
        _known.update(names)
        if not _logging_redacted and _known:
            _redact_log_records()
            _logging_redacted = True


def conceal(values: Iterable[str | None], kind: str) -> None:
    """Redact these values (credentials the gateway obtained: ``kind`` names them, as ``[secret <kind> N]``)
    wherever the environment's secrets are redacted — every log record, the call log, the audit trail — from now
    on."""
    global _concealed_count, _logging_redacted
    with _known_lock:
        for value in values:
            if value and len(value) >= MIN_REDACTED_LENGTH and value not in _concealed:
                _concealed_count += 1
                _concealed[value] = f"{kind} {_concealed_count}"
        while len(_concealed) > MAX_CONCEALED:
            del _concealed[next(iter(_concealed))]
        if not _logging_redacted and _concealed:
            _redact_log_records()
            _logging_redacted = True


def known_values() -> dict[str, str]:
    """The current values of every secret named so far, and of the credentials concealed."""
    environ = os.environ
    found = {name: environ[name] for name in list(_known) if environ.get(name)}
    found.update((name, value) for value, name in list(_concealed.items()))
    return found


def _redact_log_records() -> None:
    """Make every log record redacted as it is created, whichever logger makes it and whichever handler
    writes it: a filter on named loggers misses their children (``httpcore.http11``) and other libraries."""
    make_record = logging.getLogRecordFactory()

    def redacted_record(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = make_record(*args, **kwargs)
        values = known_values()
        if values:
            _redact_record(record, values)
        return record

    logging.setLogRecordFactory(redacted_record)


def _redact_record(record: logging.LogRecord, values: Mapping[str, str]) -> None:
    try:
        message = record.getMessage()
    except Exception:  # noqa: BLE001 — a malformed record is the logging module's to report, as it would
        return
    if redact(message, values) != message:
        # Redact the parts first, keeping the record's shape (uvicorn's access formatter unpacks its args);
        # a secret that appears only once the parts are put together (a non-text arg) collapses the record.
        if isinstance(record.msg, str):
            record.msg = redact(record.msg, values)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(arg, values) if isinstance(arg, str) else arg for arg in record.args)
        message = record.getMessage()
        redacted = redact(message, values)
        if redacted != message:
            record.msg, record.args = redacted, ()
    # A traceback's messages (an httpx error holding a URL) are formatted now, redacted, and kept as the text
    # handlers print (Formatter.format uses exc_text when it is set).
    if record.exc_info and record.exc_info[1] is not None:
        record.exc_text = redact(logging.Formatter().formatException(record.exc_info), values)
    if record.stack_info:
        record.stack_info = redact(record.stack_info, values)
