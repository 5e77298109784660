#!/usr/bin/env python3
"""Ratios of a same-run A/B (tools/device_ab.sh): for every <bench>.<side>.<r>.json in a
folder (sides: base, ours, and any others the run had), GB/s of every side per benchmark and
round, and each side's ratio to base. The spread between rounds says how much of a ratio is
noise.

Usage: tools/bench_ab.py FOLDER [BENCH]   (BENCH: only that benchmark binary's runs)
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


def side_order(side: str) -> tuple[int, str]:
    """base first, ours last, the other sides by name between them."""
    return (0 if side == "base" else 2 if side == "ours" else 1, side)


def main() -> int:
    if len(sys.argv) not in (2, 3):
        print(__doc__, file=sys.stderr)
        return 2
    folder = Path(sys.argv[1])
    only = sys.argv[2] if len(sys.argv) == 3 else None
    runs: dict[str, dict[int, dict[str, Path]]] = defaultdict(lambda: defaultdict(dict))
    for path in folder.glob("*.json"):
        m = re.fullmatch(r"(.+)\.([A-Za-z0-9_-]+)\.(\d+)\.json", path.name)
        if m and (only is None or m.group(1) == only):
            runs[m.group(1)][int(m.group(3))][m.group(2)] = path
    if not runs:
        print(f"bench_ab.py: no <bench>.<side>.<round>.json in {folder}", file=sys.stderr)
        return 1
    for bench, rounds in sorted(runs.items()):
        # Rounds with a base and at least one other side.
        complete = {r: sides for r, sides in sorted(rounds.items()) if "base" in sides and len(sides) >= 2}
        if not complete:
            continue
        sides = sorted({s for r in complete.values() for s in r}, key=side_order)
        others = [s for s in sides if s != "base"]
        results = {r: {s: gbps(p) for s, p in files.items()} for r, files in complete.items()}
        names = list(next(iter(results.values()))["base"])
        print(f"== {bench}: GB/s base -> {' / '.join(others)} (ratio to base), rounds {', '.join(map(str, complete))}")
        for name in names:
            cells = []
            for by_side in results.values():
                base = by_side["base"].get(name)
                if base is None:
                    continue
                parts = [f"{base:6.0f}"]
                for s in others:
                    if s in by_side and name in by_side[s]:
                        parts.append(f"{s} {by_side[s][name]:6.0f} ({by_side[s][name] / base:.3f})")
                cells.append(" -> ".join(parts))
            print(f"{name:58s} " + "   ".join(cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
