"""A real cluster for the cluster tests (import as ``from cluster_support import ...``): ``redis-server``, N
``tool-gateway serve`` processes and nginx (``deploy/nginx/nginx.conf.template``, round-robin) in front of them,
plus a scripted LLM all replicas talk to. ``start_cluster`` builds one; the fixtures are in ``conftest.py``.

Every response carries ``X-Gateway-Replica`` (the replica's registry id): ``Cluster.replica(response)`` reads
it, which is how a test sees that nginx spread its requests.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import httpx2
import yaml
from fake_llm import FakeLLM, Reply, openai_provider
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from support import EXAMPLES, GatewayProcess, Nginx, RedisServer, until

from gateway.settings import hash_key

API_KEY = "cluster-user-key"
ADMIN_KEY = "cluster-admin-key"
REPLICAS = 3
HEARTBEAT_S = 0.5
# Tools the cluster tests use besides the shipped examples: a call that lasts a while (in flight when a replica
# is killed).
CLUSTER_TOOLS = """\
tools:
  - id: pause
    name: Pause
    user_description: Waits, then says how long.
    ai_description: Waits the given number of seconds.
    binding:
      python: cluster_tools:pause
    annotations: {read_only: true, idempotent: true, open_world: false}
"""
CLUSTER_PYTHON = '''\
import asyncio


async def pause(seconds: float = 0.0) -> float:
    """Wait ``seconds``, then return them."""
    await asyncio.sleep(seconds)
    return seconds
'''


@dataclass
class Cluster:
    """The parts of one running cluster; ``url`` is nginx's, the way in every client uses."""

    directory: Path
    definitions: Path
    redis: RedisServer
    replicas: list[GatewayProcess]
    nginx: Nginx
    llm: FakeLLM
    ids: dict[int, str] = field(default_factory=dict)  # replica port -> its X-Gateway-Replica id

    @property
    def url(self) -> str:
        return self.nginx.url

    @staticmethod
    def headers(admin: bool = False) -> dict[str, str]:
        return {"Authorization": f"Bearer {ADMIN_KEY if admin else API_KEY}"}

    @staticmethod
    def replica(response: httpx.Response) -> str:
        """Which replica answered ``response`` (its ``X-Gateway-Replica``)."""
        return response.headers["x-gateway-replica"]

    def replica_ids(self) -> dict[int, str]:
        """Each running replica's id by port, asked of the replica directly (ids change when one restarts)."""
        self.ids = {r.port: self.replica(httpx.get(f"{r.url}/healthz", timeout=5))
                    for r in self.replicas if r.process is not None}
        return self.ids

    def edit_definitions(self, name: str, text: str) -> None:
        (self.definitions / name).write_text(text, encoding="utf-8")

    def wait_until(self, predicate: Callable[[], Any], timeout_s: float = 20, what: str = "the cluster") -> Any:
        """``until`` at a pace that spares the replicas (a predicate may ask each of them)."""
        return until(predicate, what, timeout=timeout_s, step=0.1)

    def same_version(self) -> bool:
        """Whether every running replica serves one catalog version (X-Catalog-Version asked of each)."""
        versions = {httpx.get(f"{r.url}/healthz", timeout=5).headers["x-catalog-version"]
                    for r in self.replicas if r.process is not None}
        return len(versions) == 1

    def heal(self) -> None:
        """Bring back whatever a test stopped: Redis, replicas, nginx."""
        if self.redis.process is None:
            self.redis.start()
        stopped = [r for r in self.replicas if r.process is None]
        for replica in stopped:
            replica.spawn()
        for replica in stopped:
            replica.wait_ready()
        if stopped and self.nginx.process is not None:
            # nginx marks a replica it could not reach as down for fail_timeout (10 s): a fresh nginx sends the
            # next test's requests to every replica again.
            self.nginx.stop()
        if self.nginx.process is None:
            self.nginx.start()
        self.llm.reset()
        self.replica_ids()
        self.wait_until(self.same_version, what="every replica on one catalog version")

    def stop(self) -> None:
        self.nginx.stop()
        for replica in self.replicas:
            replica.stop()
        self.redis.stop()

    def logs(self) -> str:
        return "\n".join(f"--- replica :{r.port}\n{r.log()[-4000:]}" for r in self.replicas)


def cluster_settings(redis_url: str, llm: FakeLLM, **extra: Any) -> dict[str, Any]:
    """The settings file every replica of a test cluster reads: cluster mode, an admin and a user key, the LLM."""
    return {
        "cluster": {"redis_url": redis_url, "heartbeat_s": HEARTBEAT_S},
        "api_keys": [{"name": "admin", "sha256": hash_key(ADMIN_KEY), "admin": True},
                     {"name": "user", "sha256": hash_key(API_KEY)}],
        "providers": {"scripted": openai_provider(llm)},
        **extra,
    }


def start_cluster(directory: Path, llm: FakeLLM, *, replicas: int = REPLICAS, definitions: Path | None = None,
                  settings: dict[str, Any] | None = None, env: dict[str, str] | None = None) -> Cluster:
    """Start Redis, ``replicas`` gateways (reload on, one definitions directory: a copy of ``definitions``, by
    default the shipped examples plus the ``pause`` tool) and nginx in front; stopped by ``Cluster.stop``."""
    directory.mkdir(parents=True, exist_ok=True)
    served = directory / "definitions"
    shutil.copytree(definitions or EXAMPLES, served, ignore=shutil.ignore_patterns("__pycache__"))
    if definitions is None:
        (served / "cluster.yaml").write_text(CLUSTER_TOOLS)
        (served / "python" / "cluster_tools.py").write_text(CLUSTER_PYTHON)
    redis_server = RedisServer(directory)
    redis_server.start()
    settings_file = directory / "settings.yaml"
    settings_file.write_text(yaml.safe_dump(cluster_settings(redis_server.url, llm, **(settings or {}))))
    processes = [GatewayProcess(served, "--settings", str(settings_file), log=directory / f"replica-{n}.log",
                                env={"FAKE_LLM_KEY": "sk-cluster", **(env or {})})
                 for n in range(replicas)]
    nginx = Nginx(directory / "nginx", [p.port for p in processes])
    cluster = Cluster(directory, served, redis_server, processes, nginx, llm)
    try:
        for process in processes:
            process.spawn()  # side by side: each takes seconds to import and build on a busy machine
        for process in processes:
            process.wait_ready()
        nginx.start()
        cluster.replica_ids()
    except BaseException:
        cluster.stop()
        raise
    return cluster


def rest_call(client: httpx.Client, tool: str, arguments: dict[str, Any], **kwargs: Any) -> httpx.Response:
    """``POST /tools/{tool}/call`` through whatever ``client`` points at (nginx, or one replica)."""
    return client.post(f"/tools/{tool}/call", content=json.dumps(arguments),
                       headers={"Content-Type": "application/json"}, **kwargs)


# -- clients ----------------------------------------------------------------------------------------------

SESSION_HEADERS = {"mcp-protocol-version": "2025-11-25", "accept": "application/json, text/event-stream",
                   "content-type": "application/json"}
SUM_CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "sum", "arguments": {"a": 1, "b": 2}}}


class Seen:
    """What the client's HTTP traffic met: the replica of each response, by method, and the session ids sent."""

    def __init__(self) -> None:
        self.replicas: list[tuple[str, str]] = []
        self.failures: list[int] = []
        self.sessions: set[str] = set()

    async def response(self, response: httpx2.Response) -> None:
        request = response.request
        self.replicas.append((request.method, response.headers.get("x-gateway-replica", "?")))
        if response.status_code >= 400:
            self.failures.append(response.status_code)
        for headers in (request.headers, response.headers):
            if "mcp-session-id" in headers:
                self.sessions.add(headers["mcp-session-id"])


def http_client(cluster: Cluster, seen: Seen) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers=cluster.headers(), timeout=30, event_hooks={"response": [seen.response]})


async def open_session(cluster: Cluster) -> tuple[str, str]:
    """A 2025-11-25 session opened through nginx and left open (no DELETE): its id and the replica holding it."""
    seen = Seen()
    async with http_client(cluster, seen) as http, \
            streamable_http_client(f"{cluster.url}/mcp", http_client=http, terminate_on_close=False) as (
                read, write), ClientSession(read, write) as session:
        await session.initialize()
    (session_id,) = seen.sessions
    return session_id, seen.replicas[0][1]


def session_request(cluster: Cluster, method: str, port: int, session_id: str) -> httpx.Response:
    """One request of the session straight to the replica at ``port``: a tools/call (POST) or a DELETE."""
    headers = {**cluster.headers(), **SESSION_HEADERS, "mcp-session-id": session_id}
    return httpx.request(method, f"http://127.0.0.1:{port}/mcp", headers=headers, timeout=10,
                         json=SUM_CALL if method == "POST" else None)


FILL = {"type": "function", "function": {"name": "fill_field", "description": "Fills a field of the page.",
                                         "parameters": {"type": "object", "properties": {"value": {"type": "string"}}}}}
QUESTION = [{"role": "user", "content": "Put 2+3 into the total field"}]


def handed_back(cluster: Cluster) -> tuple[httpx.Response, dict]:
    """A first request (through nginx) whose round runs ``sum`` on the gateway and hands ``fill_field`` back."""
    cluster.llm.answer(Reply(tool_calls=[("call_sum", "sum", {"a": 2, "b": 3}),
                                         ("call_fill", "fill_field", {"value": "5"})]))
    first = httpx.post(f"{cluster.url}/v1/chat/completions", headers=cluster.headers(), timeout=30,
                       json={"messages": QUESTION, "tools": [FILL]})
    assert first.status_code == 200, first.text
    assert first.json()["choices"][0]["finish_reason"] == "tool_calls"
    return first, first.json()["choices"][0]["message"]


def follow_up(message: dict) -> dict:
    return {"messages": [*QUESTION, message, {"role": "tool", "tool_call_id": "call_fill", "content": "filled"}],
            "tools": [FILL]}
