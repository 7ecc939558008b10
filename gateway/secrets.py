"""Secrets: values from the gateway's environment, named in templates as ``{{ secrets.NAME }}``.

They are read when a call needs them (so rotating a key needs no reload), and kept out of everything the
gateway shows: a missing secret is reported by name only, and ``redact`` removes values from text that leaves
a binding (results, error messages). Log lines of the HTTP libraries (which print request URLs) pass through
``RedactingFilter``.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Collection, Mapping
from typing import Any
from urllib.parse import quote

# Shorter values would blank out ordinary words; such a value is no secret anyway.
MIN_REDACTED_LENGTH = 4
_REDACTED_LOGGERS = ("httpx", "httpcore")
_known: set[str] = set()
_known_lock = threading.Lock()
_filter_installed = False


class SecretsMissing(LookupError):
    def __init__(self, names: Collection[str]):
        self.names = tuple(sorted(names))
        listed = ", ".join(self.names)
        super().__init__(f"secret(s) {listed} not set: set the environment variable(s) {listed} where the "
                         "gateway runs")


def missing(names: Collection[str], environ: Mapping[str, str] | None = None) -> list[str]:
    """The names that have no (or an empty) value in the environment."""
    environ = os.environ if environ is None else environ
    return sorted(name for name in names if not environ.get(name))


def resolve(names: Collection[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The values of ``names``; raises ``SecretsMissing`` naming every one that is not set."""
    if not names:
        return {}
    environ = os.environ if environ is None else environ
    absent = missing(names, environ)
    if absent:
        raise SecretsMissing(absent)
    remember(names)
    return {name: environ[name] for name in names}


def redact(text: str, secrets: Mapping[str, str]) -> str:
    """``text`` with each secret's value (as is, or percent-encoded) replaced by ``[secret NAME]``."""
    for name, value in secrets.items():
        if len(value) < MIN_REDACTED_LENGTH:
            continue
        for form in {value, quote(value, safe=""), quote(value)}:
            if form in text:
                text = text.replace(form, f"[secret {name}]")
    return text


def redact_value(value: Any, secrets: Mapping[str, str]) -> Any:
    """A JSON value with ``redact`` applied to every string in it (keys included)."""
    if not secrets:
        return value
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list):
        return [redact_value(item, secrets) for item in value]
    if isinstance(value, dict):
        return {redact(key, secrets): redact_value(item, secrets) for key, item in value.items()}
    return value


def remember(names: Collection[str]) -> None:
    """Make the log filter redact these secrets too (names only are kept; values are read when logging)."""
    global _filter_installed
    with _known_lock:
        if not _filter_installed:
            for logger in _REDACTED_LOGGERS:
                logging.getLogger(logger).addFilter(RedactingFilter())
            _filter_installed = True
        _known.update(names)


class RedactingFilter(logging.Filter):
    """Rewrites a record's message with every remembered secret's current value redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        environ = os.environ
        values = {name: environ[name] for name in list(_known) if environ.get(name)}
        message = record.getMessage()
        redacted = redact(message, values)
        if redacted != message:
            record.msg, record.args = redacted, ()
        return True
