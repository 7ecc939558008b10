"""``tool-gateway status [--cluster]``: a running gateway's ``/status``, read by an operator.

It asks the gateway the settings name (``--url`` to ask another: a replica, or the load balancer in front), with
the admin key from ``TOOL_GATEWAY_ADMIN_KEY`` when set, and prints the catalog it serves, each upstream source
not served fresh (down or stale, with why: an HTTP status it refused the gateway with, say), the shared state's
health and, with ``--cluster``, every live replica with its version (``/status``'s ``cluster``, from
``gateway.runtime.cluster.Replicas.view``). It is healthy (exit 0) unless the gateway is degraded or, with ``--cluster``,
its replicas serve different catalog versions (exit 1).
"""

from __future__ import annotations

import os
import time
from typing import Any

import httpx

from ..errors import GatewayError

ADMIN_KEY_ENV = "TOOL_GATEWAY_ADMIN_KEY"
TIMEOUT_S = 10.0


class StatusUnavailable(GatewayError):
    """The gateway did not answer ``/status`` (not running, wrong URL, refused the key)."""

    exit_code = 1


def fetch(url: str, environ: Any = os.environ) -> dict[str, Any]:
    """``GET <url>/status`` with the admin key, as JSON."""
    key = environ.get(ADMIN_KEY_ENV)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        response = httpx.get(url.rstrip("/") + "/status", headers=headers, timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        raise StatusUnavailable(f"cannot reach the gateway at {url}: {exc}") from None
    if response.status_code != 200:
        raise StatusUnavailable(f"{url}/status answered HTTP {response.status_code}: {response.text[:200]}")
    try:
        return response.json()
    except ValueError:
        raise StatusUnavailable(f"{url}/status did not answer JSON") from None


def report(body: dict[str, Any], url: str, *, cluster: bool) -> tuple[list[str], bool]:
    """The lines to print and whether all is well."""
    reload = "ok" if body.get("last_reload_ok", True) else "FAILED (see /status as an admin, or the log)"
    summary = (f"gateway {url}: {body.get('status', '?')}, catalog {body.get('version')}, {body.get('tools')} "
               f"tool(s), last reload {reload}")
    lines = [summary]
    for source in body.get("sources") or ():  # listed with a key (or auth off): an upstream not served fresh
        if isinstance(source, dict) and source.get("health") not in (None, "ok"):
            lines.append(f"source {source.get('id')} ({source.get('kind')}): {source.get('health')}: "
                         f"{source.get('error') or 'no error given'}")
    view = body.get("cluster")
    if view is None:
        lines.append("cluster: this gateway's /status has no cluster view (an older version, or no admin key: "
                     f"set {ADMIN_KEY_ENV})")
        return lines, not cluster
    degraded = bool(view.get("degraded"))
    lines.append(f"shared state: {view.get('mode')}, " + (f"DEGRADED: {view.get('reason', '')}" if degraded
                                                          else "not degraded"))
    if not cluster:
        return lines, not degraded
    same = bool(view.get("same_version"))
    if "replicas" not in view:  # /status lists the replicas to admins only
        lines.append(f"replicas: listed to an admin key only (set {ADMIN_KEY_ENV}); "
                     + ("all serve one catalog version" if same else "VERSIONS DIFFER"))
        return lines, same and not degraded
    replicas = view["replicas"]
    versions = view.get("versions") or sorted({r.get("version") for r in replicas})
    agreement = (f"all serve catalog {versions[0]}" if same and versions
                 else f"VERSIONS DIFFER: {', '.join(map(str, versions))}" if versions else "none listed")
    lines.append(f"replicas: {len(replicas)}, {agreement}")
    now = time.time()
    for replica in replicas:
        seen = now - float(replica.get("at", now))
        mark = "*" if replica.get("id") == view.get("replica") else " "
        worker = f"  worker {replica['worker']} of pid {replica.get('supervisor_pid')}" if "worker" in replica else ""
        lines.append(f" {mark} {replica.get('id')}{worker}  version {replica.get('version')}  {replica.get('tools')} tool(s)  "
                     f"last reload {'ok' if replica.get('last_reload_ok') else 'FAILED'}  "
                     f"heartbeat {max(seen, 0):.1f} s ago")
    return lines, same and not degraded
