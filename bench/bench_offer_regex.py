"""What an offer rule can cost: Python's ``re`` (before) against RE2 within the gateway's bounds (now).

    python bench/bench_offer_regex.py

The baseline is F11: ``(a+)+$`` under ``re`` on messages of a's ending in '!' (each character doubles the
time; stopped at 24 characters). Then ``gateway.definitions.offer_rules`` on the same pattern over a message of
``MAX_MATCHED_CHARS``, and on the slowest patterns found that still pass ``MAX_PROGRAM_SIZE`` (a counted
repetition of any character keeps one state alive per repeat), over the longest text a rule sees. Each figure
is the median of 5 searches in this process.
"""

from __future__ import annotations

import os
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from gateway.definitions.offer_rules import MAX_MATCHED_CHARS, MAX_PROGRAM_SIZE, compile_pattern, rule_holds


def median_ms(search, text: str, rounds: int = 5) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        search(text)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def largest_allowed(template: str) -> str:
    """The pattern from ``template`` with the largest repeat count that still passes MAX_PROGRAM_SIZE."""
    best = template % 1
    for count in range(1, 1001):
        try:
            compile_pattern(template % count)
        except ValueError:
            break
        best = template % count
    return best


def main() -> None:
    print("Python re, (a+)+$ on a's then '!':")
    catastrophic = re.compile(r"(a+)+$")
    for length in (18, 20, 22, 24):
        print(f"  {length:>6} chars  {median_ms(catastrophic.search, 'a' * (length - 1) + '!', rounds=1):10.1f} ms")
    print(f"RE2 (gateway.definitions.offer_rules), messages cut at {MAX_MATCHED_CHARS} chars, patterns of at most "
          f"{MAX_PROGRAM_SIZE} instructions:")
    random_text = os.urandom(MAX_MATCHED_CHARS // 2).hex()  # hex digits: no 'z', so every search reads it all
    cases = [("(a+)+$", "a" * (MAX_MATCHED_CHARS - 1) + "!"),
             (r"\b[A-Z]{2}[0-9]{9}[A-Z]{2}\b", random_text)]
    cases += [(largest_allowed(template), random_text)
              for template in (r"(a|b).{%d}z", r"(\w|\s)*a.{%d}z", r"(\w+\s*){%d}z", r"(.*a){%d}z")]
    for pattern, text in cases:
        compiled = (compile_pattern(pattern),)
        elapsed = median_ms(lambda t, patterns=compiled: rule_holds(patterns, t), text)
        print(f"  {pattern:<32} {compiled[0].programsize:>5} instr  {len(text):>6} chars  {elapsed:10.1f} ms")


if __name__ == "__main__":
    main()
