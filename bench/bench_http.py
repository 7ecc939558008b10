"""Latency the gateway adds to an HTTP-bound tool, against calling the same upstream directly with httpx.

    python bench/bench_http.py [--rounds 500]

The upstream (the demo weather-stations API) runs in its own process; so does a gateway serving the example
tools (``tool-definitions/http-demo.yaml``, pointed at that upstream) over REST. Each round calls, in turn:

    direct   httpx (pooled client) → upstream, JSON parsed
    invoke   gateway.invoke.invoke() in this process (validation, templates, binding, shaping) → upstream
    rest     POST /tools/{id}/call on the gateway process → upstream

for three tools: get_station (GET, JSON passed through), search_stations (GET with query, select + template)
and add_reading (POST, typed JSON body). Interleaving the three shares any noise between them. The table gives
median and p99 per path and the gateway's addition over direct (difference of medians, ratio).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from server_processes import free_port, spawn_gateway, stop, wait_healthy

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gateway.bindings import BuildEnv
from gateway.catalog.build import build_catalog
from gateway.definitions.load import load_definitions
from gateway.invoke import invoke
from gateway.settings import Settings
from gateway.upstream.http import new_client

READING = {"station_id": "valencia", "temperature_c": 21.5, "conditions": ["sunny"], "note": None}
CASES = {
    # tool id: (arguments, the equivalent direct request as (method, path, params, json))
    "get_station": ({"station_id": "oslo-blindern"}, ("GET", "/demo/stations/oslo-blindern", None, None)),
    "search_stations": ({"country": "NO", "limit": 5},
                        ("GET", "/demo/stations", {"country": "NO", "limit": 5}, None)),
    "add_reading": (READING, ("POST", "/demo/stations/valencia/readings", None,
                              {k: v for k, v in READING.items() if k != "station_id"})),
}


def serve_upstream(port: int) -> None:
    """Run the demo API alone (the benchmark's upstream process)."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.routing import Mount

    from gateway.server import demo_api

    app = Starlette(routes=[Mount("/demo", routes=demo_api.routes())])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def measure(upstream: str, gateway: str, definitions: Path,
                  rounds: int) -> dict[tuple[str, str], list[float]]:
    settings = Settings(definitions=definitions)
    async with new_client() as client:
        env = BuildEnv(settings=settings, root=definitions, http_client=lambda: client)
        catalog = build_catalog(load_definitions(definitions), settings, env)

        async def direct(case: str) -> None:
            method, path, params, body = CASES[case][1]
            response = await client.request(method, upstream + path, params=params, json=body)
            response.raise_for_status()
            response.json()

        async def through_invoke(case: str) -> None:
            result = await invoke(catalog, case, CASES[case][0])
            assert not result.is_error, result.text

        async def through_rest(case: str) -> None:
            response = await client.post(f"{gateway}/tools/{case}/call", json=CASES[case][0])
            assert response.status_code == 200 and not response.json()["is_error"], response.text

        paths = {"direct": direct, "invoke": through_invoke, "rest": through_rest}
        samples: dict[tuple[str, str], list[float]] = {(c, p): [] for c in CASES for p in paths}
        for warm_up in (True, False):
            for _ in range(rounds // 10 if warm_up else rounds):
                for case in CASES:
                    for name, call in paths.items():
                        started = time.perf_counter()
                        await call(case)
                        if not warm_up:
                            samples[case, name].append(time.perf_counter() - started)
    return samples


def report(samples: dict[tuple[str, str], list[float]], rounds: int) -> None:
    print(f"HTTP-bound tool latency, {rounds} calls per cell (ms); 'added' = median - direct median")
    print(f"{'tool':<16} {'path':<7} {'median':>8} {'p99':>8} {'added':>8} {'ratio':>6}")
    for case in CASES:
        base = statistics.median(samples[case, "direct"])
        for path in ("direct", "invoke", "rest"):
            values = samples[case, path]
            median = statistics.median(values)
            added = "" if path == "direct" else f"{(median - base) * 1000:+8.3f}"
            ratio = "" if path == "direct" else f"{median / base:6.2f}"
            print(f"{case:<16} {path:<7} {median * 1000:8.3f} {percentile(values, 0.99) * 1000:8.3f} "
                  f"{added:>8} {ratio:>6}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--upstream", type=int, help=argparse.SUPPRESS)  # internal: run as the upstream
    args = parser.parse_args()
    if args.upstream:
        serve_upstream(args.upstream)
        return
    upstream = f"http://127.0.0.1:{free_port()}"
    gateway = f"http://127.0.0.1:{free_port()}"
    with tempfile.TemporaryDirectory() as directory:
        definitions = Path(directory)
        text = (REPO / "tool-definitions" / "http-demo.yaml").read_text(encoding="utf-8")
        (definitions / "http-demo.yaml").write_text(text.replace("{{ gateway.base_url }}", upstream), encoding="utf-8")
        environment = {**os.environ, "PYTHONPATH": str(REPO)}
        processes = [
            subprocess.Popen([sys.executable, __file__, "--upstream", upstream.rsplit(":", 1)[1]],
                             env=environment),
            spawn_gateway(definitions, int(gateway.rsplit(":", 1)[1]), "--no-reload",
                          env=environment | {"TOOL_GATEWAY_LOG_LEVEL": "warning"}, stdout=None, stderr=None),
        ]
        try:
            wait_healthy(upstream + "/demo/stations", processes[0], "the upstream", timeout_s=30, poll_s=0.1)
            wait_healthy(gateway + "/healthz", processes[1], "the gateway", timeout_s=30, poll_s=0.1)
            samples = asyncio.run(measure(upstream, gateway, definitions, args.rounds))
        finally:
            stop(*processes, timeout_s=10)
    report(samples, args.rounds)


if __name__ == "__main__":
    main()
