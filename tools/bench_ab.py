#!/usr/bin/env python3
"""Ratios of a same-run A/B (tools/device_ab.sh): for every <bench>.base.<r>.json /
<bench>.ours.<r>.json pair in a folder, GB/s of base and ours per benchmark and round, and
ours / base. The spread between rounds says how much of a ratio is noise.

Usage: tools/bench_ab.py FOLDER
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path


def gbps(path: Path) -> dict[str, float]:
    """Benchmark name (without the /manual_time suffix) -> GB/s of one Google Benchmark JSON."""
    runs = json.loads(path.read_text())["benchmarks"]
    return {r["name"].removesuffix("/manual_time"): float(r["GB/s"]) for r in runs if "GB/s" in r}


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(sys.argv[1])
    pairs: dict[str, dict[int, dict[str, Path]]] = defaultdict(lambda: defaultdict(dict))
    for path in folder.glob("*.json"):
        m = re.fullmatch(r"(.+)\.(base|ours)\.(\d+)\.json", path.name)
        if m:
            pairs[m.group(1)][int(m.group(3))][m.group(2)] = path
    if not pairs:
        print(f"bench_ab.py: no <bench>.<base|ours>.<round>.json in {folder}", file=sys.stderr)
        return 1
    for bench, rounds in sorted(pairs.items()):
        complete = {r: sides for r, sides in sorted(rounds.items()) if len(sides) == 2}
        if not complete:
            continue
        results = {r: (gbps(s["base"]), gbps(s["ours"])) for r, s in complete.items()}
        names = list(next(iter(results.values()))[0])
        print(f"== {bench}: GB/s base -> ours (ours / base), rounds {', '.join(map(str, complete))}")
        for name in names:
            cells = []
            for base, ours in results.values():
                if name in base and name in ours:
                    cells.append(f"{base[name]:6.0f} -> {ours[name]:6.0f} ({ours[name] / base[name]:.3f})")
            print(f"{name:58s} " + "   ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
