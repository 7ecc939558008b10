"""What the loader's limits cost and buy: hostile and oversized files refused, and the cost per tool of one big file.

Each case runs `load_definitions` in a fresh subprocess (so peak memory is its own) with the default settings:

- a 59 MB file of 100,000 tools (refused from its size, before a byte is read);
- the largest file of generated tools the default node budget admits, loaded (seconds, peak RSS, per tool);
- the same tools plus one, refused by the node budget (how long the refusal takes);
- a billion-laughs file (9 levels of 9 aliases), refused by the node budget.

    python bench/bench_yaml_limits.py
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from generate import TOOL

PROBE = r'''
import json, resource, sys, time
from gateway.definitions.load import load_definitions
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
definitions = load_definitions(sys.argv[1])
elapsed = time.perf_counter() - started
print(json.dumps({"seconds": elapsed, "added_mib": (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024,
                  "tools": len(definitions.tools), "problem": str(definitions.problems[0]) if definitions.problems else ""}))
'''


def tools_file(root: Path, count: int) -> Path:
    root.mkdir(parents=True)
    # Written piece by piece: a child's peak RSS starts at its parent's (Linux keeps ru_maxrss across exec).
    with open(root / "tools.yaml", "w", encoding="utf-8") as file:
        file.write("tools:\n")
        file.writelines(TOOL.format(n=n, group=n % 10) for n in range(count))
    return root


def bomb(root: Path) -> Path:
    root.mkdir(parents=True)
    levels = ["&l0 [" + ", ".join(['"lol"'] * 9) + "]"]
    levels += [f"&l{i} [" + ", ".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, 9)]
    (root / "bomb.yaml").write_text("tools:\n  - id: bomb\n    name: x\n    user_description: x\n    ai_description: x\n"
                                    "    binding: {python: 'm:f'}\n    tags: [" + ", ".join(levels) + ", *l8]\n")
    return root


def measure(root: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE, str(root)], check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main() -> None:
    from gateway.settings import Settings

    nodes_per_tool = 53  # nodes of one generated tool (bench/generate.py), keys included
    admitted = (Settings.max_yaml_nodes - 2) // nodes_per_tool
    with tempfile.TemporaryDirectory() as tmp:
        cases = [("100,000 tools: refused by size", tools_file(Path(tmp, "huge"), 100_000)),
                 (f"{admitted:,} tools: largest admitted", tools_file(Path(tmp, "admitted"), admitted)),
                 (f"{admitted + 1:,} tools: refused by nodes", tools_file(Path(tmp, "over"), admitted + 1)),
                 ("billion laughs: refused by nodes", bomb(Path(tmp, "bomb")))]
        print(f"{'case':<40} {'MB':>6} {'seconds':>8} {'added MiB':>10} {'tools':>6}  problem")
        for name, root in cases:
            size = sum(p.stat().st_size for p in root.iterdir()) / 1e6
            row = measure(root)
            print(f"{name:<40} {size:>6.1f} {row['seconds']:>8.3f} {row['added_mib']:>10.0f} {row['tools']:>6}  "
                  f"{row['problem'][:90]}")
            if row["tools"]:
                print(f"{'':<40} per tool: {row['seconds'] / row['tools'] * 1e3:.2f} ms, "
                      f"{row['added_mib'] * 1024 / row['tools']:.1f} KiB, {size * 1e6 / row['tools']:.0f} bytes of YAML")


if __name__ == "__main__":
    main()
