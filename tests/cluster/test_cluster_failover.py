"""A replica killed under load: only the calls it was running are lost; nginx sends every later call elsewhere."""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass

import httpx
from cluster_support import Cluster

WORKERS = 6


@dataclass
class Call:
    started: float
    ended: float
    status: int  # 0: no HTTP answer at all


async def test_killing_a_replica_under_load_loses_only_its_calls_in_flight(cluster: Cluster) -> None:
    """Six clients call a 0.3 s tool through nginx without pause; one replica is killed (SIGKILL) meanwhile. Every
    call that failed was in flight when it died, some calls in flight then succeeded (on the other replicas), and
    every call started after it died succeeded."""
    stop = asyncio.Event()
    calls: list[Call] = []

    async def client() -> None:
        async with httpx.AsyncClient(base_url=cluster.url, headers=cluster.headers(), timeout=30) as http:
            while not stop.is_set():
                started = time.monotonic()
                try:
                    response = await http.post("/tools/pause/call", content=json.dumps({"seconds": 0.3}))
                    status = response.status_code if response.json().get("is_error") is False else -1
                except (httpx.TransportError, ValueError):
                    status = 0
                calls.append(Call(started, time.monotonic(), status))

    workers = [asyncio.create_task(client()) for _ in range(WORKERS)]
    await asyncio.sleep(1.5)
    killed_at = time.monotonic()
    await asyncio.to_thread(cluster.replicas[1].kill)
    dead_at = time.monotonic()
    await asyncio.sleep(2.0)
    stop.set()
    await asyncio.gather(*workers)

    failed = [c for c in calls if c.status != 200]
    in_flight = [c for c in calls if c.started < dead_at and c.ended > killed_at]
    after = [c for c in calls if c.started > dead_at]
    assert all(c.started < dead_at and c.ended > killed_at for c in failed), failed
    assert any(c.status == 200 for c in in_flight)
    assert after and all(c.status == 200 for c in after)
    assert len(failed) < len(in_flight)
