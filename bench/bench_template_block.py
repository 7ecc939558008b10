"""How long a template can hold the event loop: the worst lag of a 1 ms heartbeat while costly templates render.

Each template is rendered the way the HTTP binding renders (``run_bounded``: inline for a 2 ms slice, then in a
worker thread until the render's budget), with a heartbeat task on the same event loop that sleeps 1 ms and
records how late it wakes up; each row shows the median and the largest of the worst lags of the runs (the
machine is shared: single runs catch other processes' pauses too). The idle row is the heartbeat alone (the machine's own jitter). The "biggest
allowed" rows are the largest single operations the sandbox lets through (each one C call that nothing can
interrupt); the "refused" rows are refused before they run; the "runaway" rows run until the time budget. The
baseline row is plain Python in a worker thread: the lag any thread costs the event loop on this machine.

    python bench/bench_template_block.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import string
import time

from gateway.templates.budget import run_bounded
from gateway.templates.compile import RenderError, compile_template

WORDS = ["".join(random.choices(string.ascii_letters, k=9)) for _ in range(100_000)]
TEXT = " ".join(WORDS)[:900_000]
KEYS = dict.fromkeys(WORDS[:10_000], 1)
CASES = {
    "idle (heartbeat alone)": None,
    "baseline: 1 s of Python in a thread, no template": ("thread", {}),
    "ordinary: loop over 50 items": ("{% for w in args.w[:50] %}{{ w|upper }},{% endfor %}", {}),
    "biggest allowed: sort 10,000 strings": ("{{ args.w[:10000]|sort|length }}", {}),
    "biggest allowed: unique 100,000 strings": ("{{ args.w|unique|list|length }}", {}),
    "biggest allowed: dictsort 10,000 keys": ("{{ args.d|dictsort|length }}", {}),
    "biggest allowed: join 100,000 strings": ("{{ args.w|join(' ')|length }}", {}),
    "biggest allowed: replace in 900 kB": ("{{ args.t|replace(' ', '__')|length }}", {}),
    "biggest allowed: striptags of 1 MB": ("{{ ('<a>b' * 249000)|striptags|length }}", {}),
    "biggest allowed: wordwrap of 50 kB": ("{{ args.t[:50000]|wordwrap(79)|length }}", {}),
    "biggest allowed: tojson(indent) of 100,000": ("{{ args.w[:60000]|tojson(indent=2)|length }}", {}),
    "biggest allowed: title of 50 kB": ("{{ args.t[:50000]|title|length }}", {}),
    "biggest allowed: urlize of 50 kB": ("{{ args.t[:50000]|urlize|length }}", {}),
    "biggest allowed: 3 ** 9000 printed": ("{{ 3 ** 9000 }}", {}),
    "refused: 9 ** 30000000": ("{{ (args.p|int) ** (args.v|int) }}", {"p": 9, "v": 30_000_000}),
    "refused: 'x' * 10**9": ("{{ 'x' * 10**9 }}", {}),
    "refused: '%0999999999d' % 1": ("{{ '%0999999999d' % 1 }}", {}),
    "runaway: nested loops": ("{% for a in args.w %}{% for b in args.w %}{% endfor %}{% endfor %}", {}),
    "runaway: exponential macro": (("{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}"
                                    "{{ f(40) }}"), {}),
}


def _busy(seconds: float) -> None:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass


async def worst_lag(source: str | None, arguments: dict) -> tuple[float, float, str]:
    """(worst heartbeat lag, render wall time, outcome) for one render."""
    template = compile_template(source) if source not in (None, "thread") else None
    scope = {"args": {"w": WORDS, "t": TEXT, "d": KEYS, **arguments}}
    lags: list[float] = []
    running = True

    async def heartbeat() -> None:
        while running:
            started = time.perf_counter()
            await asyncio.sleep(0.001)
            lags.append(time.perf_counter() - started - 0.001)

    beat = asyncio.create_task(heartbeat())
    await asyncio.sleep(0.02)
    started = time.perf_counter()
    outcome = "ok"
    if source == "thread":
        await asyncio.get_running_loop().run_in_executor(None, _busy, 1.0)
    elif template is None:
        await asyncio.sleep(0.5)
    else:
        try:
            await run_bounded(lambda: template.render(scope))
        except RenderError as exc:
            outcome = str(exc).split(":")[0]
    elapsed = time.perf_counter() - started
    await asyncio.sleep(0.02)
    running = False
    await beat
    return max(lags), elapsed, outcome


async def main(repeat: int) -> None:
    print(f"{'template':50} {'worst lag: median':>17} {'max':>9} {'render':>9}  outcome")
    longest = 0.0
    for name, case in CASES.items():
        results = [await worst_lag(*(case or (None, {}))) for _ in range(repeat)]
        lags = [r[0] for r in results]
        if case is not None and case[0] != "thread":
            longest = max(longest, statistics.median(lags))
        print(f"{name:50} {statistics.median(lags) * 1000:14.1f} ms {max(lags) * 1000:6.1f} ms "
              f"{statistics.median(r[1] for r in results) * 1000:6.0f} ms  {results[-1][2]}")
    print(f"longest a template held the event loop (median of {repeat} runs): {longest * 1000:.1f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    asyncio.run(main(parser.parse_args().repeat))
