"""An idle gateway connected to every upstream of the matrix sends each, over a minute, at most its keep-alive: a
ping every ``PING_INTERVAL_S`` and a listing every ``relist_s`` (default ``DEFAULT_RELIST_S``) for an upstream with no change stream (FastMCP 4
once got two reconnects a second, forever: issue 24), less for one that holds a stream open. Counted at the
upstream's door: an HTTP counting proxy in front of each HTTP upstream, ``stdio_counter.py`` between the gateway
and each stdio one. The counts per upstream are printed at the end of the run."""

from __future__ import annotations

import math
import time

from harness import IDLE

from gateway.upstream.mcp import config as mcp_config
from gateway.upstream.mcp import watch as mcp_watch

IDLE_S = 60


def keep_alive_bound() -> int:
    """The most a minute may hold: every ping and every listing that fall in it (a window may catch one more of
    each than it spans)."""
    return (math.floor(IDLE_S / mcp_watch.PING_INTERVAL_S) + 1) + (math.floor(IDLE_S / mcp_config.DEFAULT_RELIST_S)
                                                                        + 1)


def test_an_idle_gateway_sends_each_upstream_at_most_its_keep_alive(federation):
    before = {key: len(running.sent()) for key, running in federation.upstreams.items()}
    time.sleep(IDLE_S)  # the idle minute itself: what is counted is what the gateway sends in it
    for key, running in federation.upstreams.items():
        IDLE[key] = running.sent()[before[key]:]
    bound = keep_alive_bound()
    over = {key: sent for key, sent in IDLE.items() if len(sent) > bound}
    assert not over, f"more than {bound} requests in {IDLE_S} s: {over}"
    assert all(set(sent) <= {"ping", "tools/list", "GET"} for sent in IDLE.values()), IDLE
