"""What the gateway's body rules cost: ``parse_json`` (UTF-8, no duplicate keys, no lone surrogates) against a
plain ``json.loads`` of the same bytes, on bodies the gateway reads.

    python bench/bench_bodies.py [--rounds 25]

Both are timed in the same process, interleaved round by round, in process CPU time; the best round of each is
reported (microseconds per body), so that other load on the machine weighs on both alike.
"""

from __future__ import annotations

import argparse
import json
import time
import timeit

from gateway.server.http.bodies import parse_json

BODIES = {
    "call {a, b}": b'{"a": 1, "b": 2}',
    "call, escaped text": json.dumps({"city": "Val\u00e8ncia", "q": "Krak\u00f3w \U0001F600"}).encode(),
    "chat, 1.4 KB": json.dumps({"model": "default", "messages": [{"role": "user", "content": "hello " * 40}] * 5,
                                "gateway": {"toolsets": ["math"]}}).encode(),
    "400 objects, 19 KB": json.dumps({"items": [{"id": i, "name": f"n{i}", "tags": ["a", "b"]}
                                                for i in range(400)]}).encode(),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=25)
    args = parser.parse_args()
    print(f"{'body':<22} {'bytes':>6} {'json.loads':>11} {'parse_json':>11}")
    for name, body in BODIES.items():
        number = 20_000 if len(body) < 5_000 else 300
        best = {"json.loads": float("inf"), "parse_json": float("inf")}
        for _ in range(args.rounds):
            for label, parse in (("json.loads", json.loads), ("parse_json", parse_json)):
                timer = timeit.Timer(lambda parse=parse, body=body: parse(body), timer=time.process_time)
                best[label] = min(best[label], timer.timeit(number) / number * 1e6)
        print(f"{name:<22} {len(body):>6} {best['json.loads']:>9.2f}µs {best['parse_json']:>9.2f}µs")


if __name__ == "__main__":
    main()
