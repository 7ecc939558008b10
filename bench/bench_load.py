"""Loading 10,000 generated tool definitions: time and peak memory, against bare YAML parsing in the same run.

Each measurement runs in a fresh subprocess so that peak memory (ru_maxrss) is its own. The baseline reads
and parses the same files with PyYAML's C loader and does nothing else: the floor any YAML-based loader pays.

    python bench/bench_load.py [N_TOOLS]
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from generate import generate

PROBE = r'''
import json, resource, sys, time
from pathlib import Path
root = Path(sys.argv[1]); stage = sys.argv[2]
import yaml
from gateway.catalog.build import build_catalog
from gateway.definitions.load import load_definitions
from gateway.settings import Settings
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
if stage == "yaml":
    for path in sorted(root.glob("*.yaml")):
        yaml.load(path.read_bytes(), Loader=yaml.CSafeLoader)
elif stage == "load":
    definitions = load_definitions(root)
    assert not definitions.problems, definitions.problems[:3]
else:
    catalog = build_catalog(load_definitions(root), Settings(definitions=root))
    assert len(catalog.tools) == int(sys.argv[3])
elapsed = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"seconds": elapsed, "peak_mib": peak / 1024, "added_mib": (peak - before) / 1024}))
'''


def measure(root: Path, stage: str, count: int, runs: int = 3) -> dict[str, float]:
    samples = []
    for _ in range(runs):
        out = subprocess.run([sys.executable, "-c", PROBE, str(root), stage, str(count)], check=True,
                             capture_output=True, text=True).stdout
        samples.append(json.loads(out))
    return {
        "seconds": statistics.median(s["seconds"] for s in samples),
        "peak_mib": statistics.median(s["peak_mib"] for s in samples),
        "added_mib": statistics.median(s["added_mib"] for s in samples),
    }


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    with tempfile.TemporaryDirectory() as tmp:
        root = generate(Path(tmp), count)
        baseline = measure(root, "yaml", count)
        rows = [("YAML parse only (baseline)", baseline), ("load_definitions (parse + check)", measure(root, "load", count)),
                ("load + build_catalog", measure(root, "build", count))]
    print(f"{count} tools in {count // 10} files, median of 3 fresh processes")
    print(f"{'stage':<34} {'seconds':>8} {'x base':>7} {'peak RSS MiB':>13} {'added MiB':>10}")
    for name, row in rows:
        ratio = row["seconds"] / baseline["seconds"]
        print(f"{name:<34} {row['seconds']:>8.2f} {ratio:>7.2f} {row['peak_mib']:>13.0f} {row['added_mib']:>10.0f}")


if __name__ == "__main__":
    main()
