"""Rate limits across 3 replicas behind nginx, counted in one real Redis: exact under concurrent load, on a tool and
on an API key; refused calls are HTTP 429 with Retry-After and counted as "rejected"; with Redis stopped, limited
calls fail fast with a clear error and unlimited ones still work."""

from __future__ import annotations

import asyncio
import re
import shutil
from collections.abc import Iterator

import httpx
import pytest
from cluster_support import ADMIN_KEY, API_KEY, Cluster, start_cluster
from fake_llm import FakeLLM
from support import EXAMPLES

from gateway.settings import hash_key

METERED_KEY = "cluster-metered-key"
LIMITED = """\
tools:
  - id: limited_sum
    name: Limited sum
    user_description: Adds two numbers, twenty times an hour.
    ai_description: Adds a and b.
    input_schema:
      type: object
      properties: {a: {type: number}, b: {type: number}}
      required: [a, b]
    binding: {python: "math_tools:add"}
    rate_limit: {calls: 20, per_s: 3600}
  - id: limited_until_redis_stops
    name: Limited sum (Redis test)
    user_description: Adds two numbers, a hundred times an hour.
    ai_description: Adds a and b.
    input_schema:
      type: object
      properties: {a: {type: number}, b: {type: number}}
      required: [a, b]
    binding: {python: "math_tools:add"}
    rate_limit: {calls: 100, per_s: 3600}
"""


@pytest.fixture(scope="module")
def limited(tmp_path_factory: pytest.TempPathFactory, fake_llm: FakeLLM) -> Iterator[Cluster]:
    """A 3-replica cluster serving the examples plus two limited tools, with a key limited to 10 calls an hour."""
    directory = tmp_path_factory.mktemp("rate-limits")
    definitions = directory / "source"
    shutil.copytree(EXAMPLES, definitions, ignore=shutil.ignore_patterns("__pycache__"))
    (definitions / "limited.yaml").write_text(LIMITED)
    keys = [{"name": "admin", "sha256": hash_key(ADMIN_KEY), "admin": True},
            {"name": "user", "sha256": hash_key(API_KEY)},
            {"name": "metered", "sha256": hash_key(METERED_KEY), "rate_limit": {"calls": 10, "per_s": 3600}}]
    cluster = start_cluster(directory / "cluster", fake_llm, definitions=definitions, settings={"api_keys": keys})
    try:
        yield cluster
    finally:
        cluster.stop()


async def concurrent_calls(url: str, tool: str, count: int, key: str = API_KEY) -> list[httpx.Response]:
    """``count`` REST calls of ``tool`` sent at once."""
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30,
                                 limits=httpx.Limits(max_connections=count)) as client:
        return list(await asyncio.gather(*(client.post(f"/tools/{tool}/call", json={"a": n, "b": 1})
                                           for n in range(count))))


def rejected_in_metrics(cluster: Cluster, tool: str) -> float:
    """The "rejected" calls of ``tool`` summed over every replica's /metrics."""
    total = 0.0
    pattern = re.compile(r'^tool_gateway_calls_total\{([^}]*)\} (\S+)$', re.MULTILINE)
    for replica in cluster.replicas:
        text = httpx.get(f"{replica.url}/metrics", headers=cluster.headers(admin=True), timeout=10).text
        total += sum(float(value) for labels, value in pattern.findall(text)
                     if f'tool="{tool}"' in labels and 'outcome="rejected"' in labels)
    return total


async def test_a_tool_limit_is_exact_across_replicas_under_concurrent_load(limited: Cluster):
    """60 concurrent calls through nginx on a tool limited to 20 an hour: exactly 20 answered, 40 refused with
    429 + an integer Retry-After + the JSON error shape holding the result, spread over all 3 replicas, and the 40
    counted as "rejected" in the replicas' metrics."""
    responses = await concurrent_calls(limited.url, "limited_sum", 60)

    statuses = [r.status_code for r in responses]
    assert statuses.count(200) == 20 and statuses.count(429) == 40
    assert {limited.replica(r) for r in responses} == set(limited.ids.values())
    for refused in (r for r in responses if r.status_code == 429):
        assert refused.headers["retry-after"].isdigit() and int(refused.headers["retry-after"]) >= 1
        body = refused.json()
        assert body["status"] == 429 and "rate limited to 20 call(s) per 3600 s" in body["error"]
        assert body["result"]["is_error"] is True and body["result"]["tool"] == "limited_sum"
    assert all(r.json()["is_error"] is False for r in responses if r.status_code == 200)
    assert rejected_in_metrics(limited, "limited_sum") == 40


async def test_an_api_key_limit_is_exact_across_replicas(limited: Cluster):
    """A key limited to 10 calls an hour sends 30 at once on an unlimited tool: exactly 10 answered; another key's
    calls are not limited."""
    metered = await concurrent_calls(limited.url, "sum", 30, key=METERED_KEY)
    other = await concurrent_calls(limited.url, "sum", 30)

    assert [r.status_code for r in metered].count(200) == 10
    assert all("API key 'metered' is rate limited" in r.json()["error"] for r in metered if r.status_code == 429)
    assert [r.status_code for r in other].count(200) == 30


def test_with_redis_stopped_limited_calls_fail_fast_and_unlimited_ones_work(limited: Cluster):
    """Redis stopped: a limited call is an error result saying the shared state is unavailable and the call was
    not run (fail closed); an unlimited call on every replica still answers; once Redis is back, limited calls
    are counted again with no restart."""
    headers = limited.headers()
    limited.redis.stop()
    try:
        with httpx.Client(headers=headers, timeout=10) as client:
            refused = [client.post(f"{r.url}/tools/limited_until_redis_stops/call", json={"a": 1, "b": 2})
                       for r in limited.replicas]
            free = [client.post(f"{r.url}/tools/sum/call", json={"a": 1, "b": 2}) for r in limited.replicas]
    finally:
        limited.redis.start()

    for response in refused:
        body = response.json()
        assert body["is_error"] is True and "was not run" in body["error"]
        assert "shared state that counts it is unavailable" in body["error"]
    assert [r.json()["result"] for r in free] == [3, 3, 3]
    with httpx.Client(base_url=limited.url, headers=headers, timeout=10) as client:
        limited.wait_until(lambda: client.post("/tools/limited_until_redis_stops/call",
                                               json={"a": 1, "b": 2}).status_code == 200,
                           what="a limited call after Redis came back")

