"""CPU per ``invoke`` of the shipped ``sum`` tool in process, and of the sync worker hop alone.

    python bench/bench_invoke.py [--calls 20000] [--rounds 3] [--baseline SRC]

Rows (µs of CPU per call by ``time.process_time``, best of ``--rounds``; the process's every thread counts):

    pipeline   ``invoke(catalog, "sum", {"a": 1, "b": 2}, context)`` with the tool called inline: only the
               call path (arguments, validation, result, events, timeout) counts
    with hop   the same with the tool as shipped: a sync function, run in a worker thread
    hop x1     ``call_sync`` of a trivial function, one call at a time
    hop x16    the same, 16 calls at once

The baseline is the gateway package of another source tree (``git archive <commit> gateway schemas | tar -x -C
/tmp/before``, then ``--baseline /tmp/before``), run the same way in a process of its own, in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _add(a: float, b: float) -> float:
    return a + b


async def _rows(calls: int, rounds: int) -> dict[str, float]:
    sys.path.insert(0, str(REPO / "tests"))
    from support import EXAMPLES, catalog_for  # after the baseline tree is on the path

    from gateway.bindings.workers import call_sync
    from gateway.context import CallContext
    from gateway.invoke import invoke

    shipped, inlined = catalog_for(EXAMPLES), catalog_for(EXAMPLES)
    function = inlined.get("sum").executors["server"].function

    async def inline(arguments: dict, context: object) -> float:
        return function(**arguments)

    inlined.get("sum").executors["server"] = inline  # type: ignore[index]  # a plain dict
    context = CallContext(surface="rest")

    async def calls_of(catalog: object, n: int) -> None:
        for _ in range(n):
            await invoke(catalog, "sum", {"a": 1, "b": 2}, context)  # type: ignore[arg-type]

    async def hops(n: int, at_once: int) -> None:
        async def one(i: int) -> None:
            for _ in range(n // at_once):
                await call_sync(("bench", i % 2), 16, _add, {"a": 1, "b": 2})

        await asyncio.gather(*(one(i) for i in range(at_once)))

    work = {"pipeline": lambda n: calls_of(inlined, n), "with hop": lambda n: calls_of(shipped, n),
            "hop x1": lambda n: hops(n, 1), "hop x16": lambda n: hops(n, 16)}
    found = {}
    for name, run in work.items():
        await run(calls // 10)  # warm: lazy validators and checks made, threads started
        best = []
        for _ in range(rounds):
            started = time.process_time()
            await run(calls)
            best.append((time.process_time() - started) / calls * 1e6)
        found[name] = min(best)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", type=Path, help="also run the gateway package of this source tree")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # one tree's rows, for the parent
    args = parser.parse_args()
    if args.json:
        print(json.dumps(asyncio.run(_rows(args.calls, args.rounds))))
        return
    trees = {"this tree": REPO} | ({"baseline": args.baseline.resolve()} if args.baseline else {})
    results = {}
    for label, tree in trees.items():
        environ = os.environ | {"PYTHONPATH": str(tree)}
        out = subprocess.run([sys.executable, __file__, "--json", "--calls", str(args.calls), "--rounds",
                              str(args.rounds)], env=environ, check=True, capture_output=True, text=True,
                             cwd=tree).stdout
        results[label] = json.loads(out.strip().splitlines()[-1])
    print(f"invoke of 'sum' in process, µs of CPU per call (best of {args.rounds} x {args.calls:,})")
    print(f"{'row':10}" + "".join(f"{label:>12}" for label in results) + ("       ratio" if args.baseline else ""))
    for row in results["this tree"]:
        values = [results[label][row] for label in results]
        ratio = f"{values[0] / values[1]:11.2f}x" if args.baseline else ""
        print(f"{row:10}" + "".join(f"{v:12.1f}" for v in values) + ratio)


if __name__ == "__main__":
    main()
