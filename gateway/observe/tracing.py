"""OpenTelemetry traces (the ``[otel]`` extra, ``pip install 'tool-gateway[otel]'``): whether a gateway traces.

``tracing`` in the settings:

- ``auto`` (the default): on when the extra is installed and an exporter is asked for — ``OTEL_TRACES_EXPORTER``
  set to anything but ``none``, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set;
- ``on``: always; the gateway does not start without the extra;
- ``off``: never.

``OTEL_SDK_DISABLED=true`` turns tracing off whatever the setting says, as it does for every OpenTelemetry SDK.
Everything else (service name, exporter, endpoint, headers, sampler, batching) comes from the standard
``OTEL_*`` variables; see ``gateway.observe.otel`` for the spans.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..events import Observer
from ..settings import SettingsInvalid

if TYPE_CHECKING:
    from ..runtime.gateway import Gateway

log = logging.getLogger("gateway.observe.tracing")
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def make(gateway: Gateway, *, exporter: Any = None, environ: Mapping[str, str] = os.environ) -> Observer | None:
    """The tracer of ``gateway``, or None when tracing is off. ``exporter`` (a ``SpanExporter``) replaces the
    exporters the variables name, and counts as asking for traces (tests pass an in-memory one)."""
    mode = gateway.settings.tracing
    if mode == "off" or environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    if mode == "auto" and exporter is None and not asked_for(environ):
        return None
    try:
        from . import otel
    except ImportError as exc:
        if mode == "on":
            raise SettingsInvalid(f"tracing: on needs the OpenTelemetry SDK, which is missing ({exc}); install it "
                                  "with: pip install 'tool-gateway[otel]'") from None
        log.warning("OTEL_ variables ask for traces, but the OpenTelemetry SDK is missing (%s): no traces. Install "
                    "it with: pip install 'tool-gateway[otel]'", exc)
        return None
    return otel.Tracer(otel.make_provider(None if exporter is None else [exporter]))


def asked_for(environ: Mapping[str, str]) -> bool:
    """Whether the variables ask for an exporter (what ``auto`` waits for)."""
    exporter = environ.get("OTEL_TRACES_EXPORTER", "").strip().lower()
    if exporter == "none":  # said in so many words: an endpoint set for other signals does not count
        return False
    return bool(exporter) or any(environ.get(name) for name in ENDPOINT_VARIABLES)
