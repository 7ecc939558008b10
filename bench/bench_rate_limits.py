"""What a rate limit costs a call: ``invoke`` of one Python tool (``echo``) unlimited, limited in memory, and
limited in a real redis-server (GCRA script per call), interleaved over rounds in the same run; plus the check an
unlimited call pays (``rate_limits.applying`` and the catalog's memo lookup), which is its whole cost.

    python bench/bench_rate_limits.py [--calls 2000] [--rounds 5]

The limit is never reached (10^9 calls per second): this measures counting, not refusing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from support import RedisServer

from gateway.bindings import BuildEnv
from gateway.catalog.build import build_catalog
from gateway.catalog.snapshot import Catalog
from gateway.definitions.load import load_definitions
from gateway.invoke import invoke
from gateway.settings import Settings
from gateway.state import open_state
from gateway.state.rate_limits import applying, key_limits

TOOLS = """\
tools:
  - {id: free, name: Free, user_description: d, ai_description: d, binding: {python: "bench_echo:echo"}}
  - {id: limited, name: Limited, user_description: d, ai_description: d, binding: {python: "bench_echo:echo"},
     rate_limit: {calls: 1000000000, per_s: 1}}
"""


def catalog(root: Path, redis_url: str | None) -> Catalog:
    settings = Settings(definitions=root)
    env = BuildEnv(settings=settings, root=root, state=open_state(redis_url))
    return build_catalog(load_definitions(root), settings, env)


async def per_call_us(served: Catalog, tool: str, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        result = await invoke(served, tool, {"text": "x"})
        assert not result.is_error, result.text
    return (time.perf_counter() - started) / calls * 1e6


async def main(calls: int, rounds: int, redis_url: str, root: Path) -> None:
    memory, redis = catalog(root, None), catalog(root, redis_url)
    rows = {"unlimited": (memory, "free"), "limited, memory": (memory, "limited"),
            "limited, redis": (redis, "limited")}
    figures: dict[str, list[float]] = {name: [] for name in rows}
    for _ in range(rounds):
        for name, (served, tool) in rows.items():
            figures[name].append(await per_call_us(served, tool, calls))
    for name, values in figures.items():
        print(f"invoke, {name:16s} median {statistics.median(values):7.1f} us/call over {rounds} rounds")
    await redis.state.aclose()
    keys = key_limits(memory.settings.api_keys)
    n = 200_000
    check = timeit.timeit(lambda: applying("free", None, None, memory.memo("rate_limits:keys", lambda: keys)),
                          number=n)
    print(f"the check an unlimited call pays: {check / n * 1e9:.0f} ns/call")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "definitions"
        (root / "python").mkdir(parents=True)
        (root / "python" / "bench_echo.py").write_text("def echo(text: str) -> str:\n    return text\n")
        (root / "tools.yaml").write_text(TOOLS)
        server = RedisServer(Path(scratch))
        server.start()
        try:
            asyncio.run(main(options.calls, options.rounds, server.url, root))
        finally:
            server.stop()
