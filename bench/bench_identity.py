"""What identity costs per call: REST tools/call throughput with auth off, with an API key, and with an OAuth
access token (RS256 JWT from an issuer on 127.0.0.1), in the same run; and, in this process, what checking one
token costs the first time (signature and claims) and every time after (remembered by its digest).

    python bench/bench_identity.py [--concurrency 16] [--duration 2] [--rounds 3]

Rows (one gateway process each, serving the shipped examples; every call is ``sum`` with a=1, b=2):

    open     auth off: the floor
    key      one API key (``api_keys``), sent as a bearer: a SHA-256 and a constant-time compare per call
    token    ``oauth`` on; one access token for the whole run, as a client holds one until it expires

The servers, the load generator and its measures are ``bench_serving.py``'s (server on CPU 0, load on CPU 1, rows
interleaved, medians). Targets: key >= 0.95 x open, token >= 0.9 x open.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from bench_serving import EXAMPLES, Server, _pin, add_load_options, measure
from server_processes import ServedHere, free_port, wait_listening

ROWS = ("open", "key", "token")
RATIOS = (("key", "open", 0.95), ("token", "open", 0.9), ("token", "key", None))
KEY = "bench-key-0123456789"
AUDIENCE = "http://127.0.0.1/bench"


class Issuer(ServedHere):
    """Discovery and JWKS on 127.0.0.1 (uvicorn in a thread), and tokens signed with its RSA key."""

    def __init__(self) -> None:
        from cryptography.hazmat.primitives.asymmetric import rsa
        from jwt.algorithms import RSAAlgorithm
        from starlette.applications import Starlette
        from starlette.responses import JSONResponse
        from starlette.routing import Route

        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = {**RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True), "kid": "bench", "use": "sig"}

        async def discovery(request: Any) -> JSONResponse:
            return JSONResponse({"issuer": self.url, "jwks_uri": f"{self.url}/jwks"})

        async def jwks(request: Any) -> JSONResponse:
            return JSONResponse({"keys": [jwk]})

        super().__init__(Starlette(routes=[Route("/.well-known/openid-configuration", discovery),
                                           Route("/jwks", jwks)]))

    def token(self, sub: str = "bench") -> str:
        import jwt

        now = int(time.time())
        return jwt.encode({"iss": self.url, "sub": sub, "aud": AUDIENCE, "iat": now, "exp": now + 3600,
                           "scope": "tools"}, self.key, "RS256", headers={"kid": "bench"})



def serve(row: str, port: int, scratch: Path, issuer: str) -> None:
    """One gateway configured as ``row`` (a subprocess: ``bench_identity.py serve <row> <port> <dir> <issuer>``)."""
    _pin(0)
    from gateway.identity.config import parse
    from gateway.server import serve as serve_gateway
    from gateway.settings import Settings, _api_key, hash_key

    definitions = scratch / row / "tool-definitions"
    shutil.copytree(EXAMPLES, definitions, ignore=shutil.ignore_patterns("__pycache__"))
    options: dict[str, Any] = {}
    if row == "key":
        options["api_keys"] = (_api_key({"name": "bench", "sha256": hash_key(KEY)}),)
    elif row == "token":
        options["oauth"] = parse({"issuer": issuer, "audience": AUDIENCE})
    serve_gateway(Settings(definitions=definitions, port=port, reload=False, log_level="warning", tracing="off",
                           **options))


class Gateway(Server):
    def __init__(self, row: str, scratch: Path, issuer: str):  # not Server's: it starts its own kinds
        self.port = free_port()
        self.process = subprocess.Popen([sys.executable, __file__, "serve", row, str(self.port), str(scratch), issuer],
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_listening(self.process, self.port, f"the {row} gateway")


def check_costs(issuer: Issuer, count: int = 2000) -> tuple[float, float]:
    """Microseconds to check a token the first time, and a remembered one, in this process (median of batches)."""
    from gateway.identity.config import parse
    from gateway.identity.tokens import Verifier

    verifier = Verifier(parse({"issuer": issuer.url, "audience": AUDIENCE}))
    tokens = [issuer.token(sub=f"user{i}") for i in range(count)]

    async def run() -> tuple[float, float]:
        await verifier.identity(tokens[0])  # the keys fetched once, outside the timing
        first, again = [], []
        for batch in range(1, count, 200):
            chunk = tokens[batch:batch + 200]
            started = time.perf_counter()
            for token in chunk:
                await verifier.identity(token)
            first.append((time.perf_counter() - started) / len(chunk))
            started = time.perf_counter()
            for token in chunk:
                await verifier.identity(token)
            again.append((time.perf_counter() - started) / len(chunk))
        return statistics.median(first) * 1e6, statistics.median(again) * 1e6

    return asyncio.run(run())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command")
    serve_cmd = sub.add_parser("serve")
    serve_cmd.add_argument("row", choices=ROWS)
    serve_cmd.add_argument("port", type=int)
    serve_cmd.add_argument("scratch", type=Path)
    serve_cmd.add_argument("issuer")
    add_load_options(parser)
    args = parser.parse_args()
    if args.command == "serve":
        return serve(args.row, args.port, args.scratch, args.issuer)

    scratch = Path(tempfile.mkdtemp(prefix="bench-identity-"))
    issuer = Issuer()
    credentials = {"open": "", "key": f"Bearer {KEY}", "token": f"Bearer {issuer.token()}"}
    servers = {row: Gateway(row, scratch, issuer.url) for row in ROWS}
    runs: dict[str, list[dict[str, float]]] = {row: [] for row in ROWS}
    try:
        for round_ in range(args.rounds):
            for row in ROWS[round_ % len(ROWS):] + ROWS[:round_ % len(ROWS)]:
                os.environ["BENCH_AUTHORIZATION"] = credentials[row]  # the load generator's (bench_serving)
                runs[row].append(measure(servers[row], "rest", args.concurrency, args.duration))
        first_us, again_us = check_costs(issuer)
    finally:
        for server in servers.values():
            server.stop()
        issuer.stop()
        shutil.rmtree(scratch, ignore_errors=True)

    def median(row: str, key: str) -> float:
        return statistics.median(run[key] for run in runs[row])

    print(f"REST tools/call (sum), {args.concurrency} connections, {args.rounds} x {args.duration:g} s per row, medians")
    print(f"{'row':<7} {'calls/s':>9} {'calls/CPU-s':>12} {'errors':>7}")
    for row in ROWS:
        print(f"{row:<7} {median(row, 'per_s'):>9.0f} {median(row, 'per_cpu_s'):>12.0f} "
              f"{sum(run['errors'] for run in runs[row]):>7}")
    print(f"\n{'ratio':<14} {'calls/s':>8} {'calls/CPU-s':>12}  target")
    for row, baseline, target in RATIOS:
        wall = median(row, "per_s") / median(baseline, "per_s")
        cpu = median(row, "per_cpu_s") / median(baseline, "per_cpu_s")
        print(f"{row + ' / ' + baseline:<14} {wall:>7.2f}x {cpu:>11.2f}x  {f'>= {target:g}x' if target else ''}")
    print(f"\nchecking one token in this process: {first_us:.0f} us the first time (RS256 signature, claims), "
          f"{again_us:.1f} us once remembered")


if __name__ == "__main__":
    main()
